"""The Starlette app: the chat endpoint, the routes of every wire format, and `create_app`.

A chat request takes the shared steps of `mockprovider.pipeline` (auth, body, options,
scenario, latency, fault), then the scripted reply, cut and counted, goes out as JSON or SSE.
The endpoints are module-level functions; everything they need per server (defaults, key,
limits, the scenario table, the journal) is a frozen `Config` on `app.state.config`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import o200k
from mockprovider import (
    anthropic_api,
    faults,
    gemini_api,
    headers,
    memo,
    midstream,
    ollama_api,
    responses_api,
    scenarios,
    transcript,
    wire,
)
from mockprovider.errors import APIError
from mockprovider.faults import Options
from mockprovider.headers import ApiHeaders
from mockprovider.journal import Journal, render_matching
from mockprovider.mcp import endpoint as mcp_endpoint
from mockprovider.mcp.callable import CallableTool, McpOptions
from mockprovider.mcp.host import McpHost
from mockprovider.mcp.ledger import Ledger
from mockprovider.pipeline import (
    ClientGone,
    Config,
    authorize,
    config_of,
    delay_or_fault,
    injected,
    listing_options,
    log,
    read_raw,
    resolve,
    scripted_reply,
)
from mockprovider.scenario_files import Source, load_scenarios, paths_from_env
from mockprovider.validation import ChatRequest, chat_request, check_depth, parse_json


async def _stream(completion: wire.Completion, req: ChatRequest, options: Options) -> AsyncIterator[bytes]:
    delay = 1 / options.rate_tps if options.rate_tps else 0.0
    for chunk, tokens in wire.weighed_chunks(completion, include_usage=req.include_usage):
        yield wire.sse(chunk)
        if delay and tokens:
            await asyncio.sleep(delay * tokens)
    yield wire.sse("[DONE]")


async def _chat(request: Request) -> Response | bytes:
    """The chat endpoint's answer: a Response for streams and faults, else the JSON body's bytes."""
    config = config_of(request)
    raw = await read_raw(request, config)
    body, known = parse_json(raw, memo.parse)
    check_depth(raw, body, known)
    req = chat_request(body, known)
    script, options = resolve(request, config, req.model)
    fault = await delay_or_fault(request, req.model, req.transcript.turn, options)
    cut = fault if fault is not None and midstream.applies(fault, req.stream) else None
    if fault is not None and cut is None:
        out = await injected(request, fault, options)
        return out.response() if isinstance(out, APIError) else Response(out, media_type="application/json")
    reply, options = await scripted_reply(
        request, script, req.transcript.conversation(req.tools), req.tools, options, req.tool_choice
    )
    prompt_tokens = await transcript.prompt_tokens(req.transcript, req.tools)
    completion = wire.complete(
        reply,
        model=req.model,
        prompt_tokens=prompt_tokens,
        max_tokens=req.max_tokens,
        cache=await transcript.prompt_cache(req.transcript.messages, req.tools, None, prompt_tokens,
                                     req.transcript.turn, options),
    )
    if cut is not None:
        if req.stream:
            return midstream.stream(_stream(completion, req, options), cut, lambda _: wire.sse(STREAM_ERROR))
        return midstream.dropped_body(wire.render(completion), cut)
    if req.stream:
        return StreamingResponse(
            _stream(completion, req, options),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    return wire.render(completion)


STREAM_ERROR = APIError(
    500, "The server had an error while processing your request (injected fault).", type="server_error"
).body()
"""What OpenAI sends when a chat stream fails after it started: an error object as a data line."""


_JSON = (b"content-type", b"application/json")


async def chat_completions(request: Request) -> Response:
    """POST /v1/chat/completions behind the router (a base-URL options prefix, a root path):
    `ApiHeaders` adds the real API's headers."""
    out = await _chat(request)
    return Response(out, media_type="application/json") if isinstance(out, bytes) else out


async def models(request: Request) -> Response:
    if headers.from_google_genai(request.scope):
        return await gemini_api.list_models(request)
    config = config_of(request)
    authorize(request, config)
    listing_options(request, config)
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "mockprovider",
         "description": scenarios.describe(script)}
        for name, script in config.scenarios.items()
    ]
    return JSONResponse({"object": "list", "data": data, "options": faults.SYNTAX})


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def request_journal(request: Request) -> Response:
    config = config_of(request)
    authorize(request, config)
    if config.journal is None:
        raise APIError(
            404, "The journal is off; start the server with --journal N to keep the last N requests.",
            code="journal_off",
        )
    query = request.query_params
    body = render_matching(config.journal, **{name: query.get(name)
                                              for name in ("path", "model", "kind", "tool", "session")})
    return Response(body, media_type="application/json")


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.response()


async def _client_gone(request: Request, exc: Exception) -> Response:
    log.info("%s %s: the client left while its request waited; dropped", request.method, request.url.path)
    return Response(status_code=499)  # nobody reads it; uvicorn discards a reply to a closed socket


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return APIError(exc.status_code, message, code=code, headers=dict(exc.headers or {})).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error")
    error = APIError(500, f"Internal error in the mock: {type(exc).__name__}", type="server_error")
    # This handler answers outside ApiHeaders and ChatLane: the API's shape and headers are added here.
    path = request.url.path
    if path.endswith("/messages"):
        response = anthropic_api.error_response(error, request)
    elif "/api/" in path:
        response = ollama_api.error_response(error)
    elif "/v1beta/" in path or headers.gemini_method(path):
        response = gemini_api.error_response(error)
    else:
        response = error.response()
    response.raw_headers.extend(headers.of(request.scope, config_of(request).defaults))
    return response


class ChatLane:
    """Middleware: `POST /v1/chat/completions`, the request an agent loop sends every turn,
    goes straight to its endpoint, past the router, the exception middleware and `ApiHeaders`.

    Those layers cost what the mock's budget against a bare endpoint cannot spare (results/bench.md,
    speed tricks: "ChatLane"), so a plain JSON reply is sent here with its headers written in.
    What the endpoint raises is answered by the app's own handlers, as behind the router;
    anything else still reaches the server-error handler, which sits outside this middleware.
    Every other request takes the usual path.
    """

    def __init__(self, app: ASGIApp, defaults: Options) -> None:
        self.app = app
        self.defaults = defaults

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (scope["type"] == "http" and scope["path"] == "/v1/chat/completions"
                and scope["method"] == "POST" and not scope.get("root_path")):
            await self.app(scope, receive, send)
            return
        rid, started = headers.start(scope)
        try:
            out = await _chat(Request(scope, receive, send))
        except (APIError, ClientGone) as exc:
            handler = _api_error if isinstance(exc, APIError) else _client_gone
            out = await handler(Request(scope, receive, send), exc)
        if isinstance(out, bytes):
            options = scope.get(headers.OPTIONS) or self.defaults
            head = headers.openai_headers(options, rid, started)
            head += ((b"content-length", b"%d" % len(out)), _JSON)
            await send({"type": "http.response.start", "status": 200, "headers": head})
            await send({"type": "http.response.body", "body": out})
        else:
            await out(scope, receive, headers.adding(scope, send, self.defaults, rid, started))


ROUTES = [
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/o/{options}/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/o/{options}/v1/models", models, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/journal", request_journal, methods=["GET"]),
    *responses_api.ROUTES,
    *anthropic_api.ROUTES,
    *gemini_api.ROUTES,
    *ollama_api.ROUTES,
    *mcp_endpoint.ROUTES,
]


def create_app(
    *,
    latency_ms: float = 0.0,
    api_key: str | None = None,
    max_body_bytes: int = 1_000_000,
    scenario_files: Iterable[Source] = (),
    journal: int = 0,
    mcp_tools: Iterable[CallableTool] = (),
    mcp_ledger: str | os.PathLike[str] | None = None,
    mcp_page_size: int = 100,
) -> Starlette:
    """The scripted provider. Server-wide defaults here; per-request options override them.

    `scenario_files`: files, folders or parsed dicts, served beside the built-ins (a bad one
    raises `ScenarioFileError` here, never per request). `journal`: keep the last N requests.
    The MCP server at /mcp (docs/mcp.md) also serves `mcp_tools` (tools given in code), records
    side effects in the folder `mcp_ledger`, and lists `mcp_page_size` items a page.
    """
    table = dict(scenarios.SCENARIOS) | load_scenarios(scenario_files)
    o200k.encoding()  # load the ranks now, not during the first request
    defaults = Options(latency_ms=latency_ms)
    app = Starlette(
        routes=ROUTES,
        middleware=[Middleware(ChatLane, defaults=defaults), Middleware(ApiHeaders, defaults=defaults)],
        exception_handlers={
            APIError: _api_error,
            ClientGone: _client_gone,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    app.state.config = Config(
        defaults=defaults, api_key=api_key, max_body_bytes=max_body_bytes,
        scenarios=table, journal=Journal(journal) if journal else None,
        mcp=McpOptions(tools=tuple(mcp_tools), ledger=Ledger(mcp_ledger) if mcp_ledger else None,
                       page_size=mcp_page_size),
    )
    setattr(app.state, mcp_endpoint.STATE, McpHost(lambda: app.state.config))
    return app


def app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` and multi-worker serving, configured by MOCK_* variables."""
    return create_app(
        latency_ms=float(os.environ.get("MOCK_LATENCY_MS", "0")),
        api_key=os.environ.get("MOCK_API_KEY") or None,
        max_body_bytes=int(os.environ.get("MOCK_MAX_BODY_BYTES", "1000000")),
        scenario_files=paths_from_env(os.environ.get("MOCK_SCENARIOS")),
        journal=int(os.environ.get("MOCK_JOURNAL", "0")),
        mcp_ledger=os.environ.get("MOCK_MCP_LEDGER") or None,
    )
