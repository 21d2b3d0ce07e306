"""The Starlette app: the route table of every surface, the server's own endpoints, and `create_app`.

A request's path reads top to bottom: the route picks its surface in `apis/` (one module per
wire format), which reads the request (`reading/`), runs the scenario (`scripts/`) and renders
what `replies/` produced. Everything a surface needs per server (defaults, key, limits, the
scenario table, the journal) is a frozen `Config` on `app.state.config`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import o200k
from mockprovider import off_loop
from mockprovider.apis import (
    anthropic,
    azure,
    bedrock,
    bedrock_embed,
    chat,
    chat_at_once,
    embeddings,
    gemini,
    gemini_embed,
    ollama,
    ollama_embed,
    responses,
)
from mockprovider.apis.steps import (
    Config,
    api_error,
    authorize,
    client_gone,
    config_of,
    listing_options,
    log,
)
from mockprovider.cycle import in_task
from mockprovider.errors import APIError, ClientGone
from mockprovider.journal import Journal, plain_path, render_matching
from mockprovider.mcp import endpoint as mcp_endpoint
from mockprovider.mcp.callable import CallableTool, McpOptions
from mockprovider.mcp.host import TEST, McpHost
from mockprovider.mcp.ledger import Ledger
from mockprovider.metrics import CountRequests, Metrics, metrics_page, readyz
from mockprovider.reading import attempts
from mockprovider.reading.request_headers import test_id
from mockprovider.replies import embedding, headers
from mockprovider.replies.faults import LOG_LINES, print_log_lines
from mockprovider.replies.headers import ApiHeaders
from mockprovider.scripts import scenarios
from mockprovider.scripts.files import Source, load_scenarios, paths_from_env
from mockprovider.scripts.options import SYNTAX, Options


async def models(request: Request) -> Response:
    """Every scenario, then the real embedding models the embedding routes answer to."""
    if headers.from_google_genai(request.scope):
        return await gemini.list_models(request)
    config = config_of(request)
    authorize(request, config)
    listing_options(request, config)
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "mockprovider",
         "description": scenarios.describe(script)}
        for name, script in config.scenarios.items()
    ]
    data += [
        {"id": name, "object": "model", "created": 0, "owned_by": "mockprovider",
         "description": f"An embedding model: vectors of {shape.dimensions} numbers, inputs of up to "
                        f"{shape.max_tokens} tokens (docs/formats.md, Embeddings)."}
        for name, shape in embedding.KNOWN.items() if name not in config.scenarios
    ]
    return JSONResponse({"object": "list", "data": data, "options": SYNTAX})


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
    # A journal holds up to 64 MB: rendered on a worker thread, every other request goes on meanwhile.
    body = await run_in_threadpool(functools.partial(render_matching, config.journal, **{
        name: query.get(name) for name in ("path", "model", "test_id", "kind", "tool", "session")}))
    return Response(body, media_type="application/json")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    message = f"{request.method} {request.url.path}: {exc.detail}"
    error = APIError(exc.status_code, message, code=code, headers=dict(exc.headers or {}))
    # A model id no route matches (one holding a newline, say), behind a proxy's prefix or not.
    if _bedrock_path(headers.routed(request.scope)):
        return bedrock.error_response(error, request)
    return error.response()


def _bedrock_path(path: str) -> bool:
    """Under Bedrock's `/model/` or `/foundation-models`: answered in AWS's shape, whatever the
    model id holds (checked before the other surfaces' tests, which a model id could pass)."""
    return plain_path(path).startswith(("/model/", "/foundation-models"))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error")
    error = APIError(500, f"Internal error in the mock: {type(exc).__name__}", type="server_error")
    # This handler answers outside ApiHeaders: the API's shape and headers are added here.
    path = headers.routed(request.scope)  # the path less a proxy's prefix, which may hold '/api/'
    if _bedrock_path(path):
        return bedrock.error_response(error, request)  # AWS's own headers, none of OpenAI's
    if headers.anthropic_path(path):
        response = anthropic.error_response(error, request)
    elif "/api/" in path:
        response = ollama.error_response(error)
    elif "/v1beta/" in path or headers.gemini_method(path):
        response = gemini.error_response(error)
    else:
        response = error.response()
    response.raw_headers.extend(headers.of(request.scope, config_of(request).defaults))
    return response


_MCP_PATH = re.compile(r"(?:/o/[^/]*)?/mcp(?:/|$)")


class MockApp(Starlette):
    """Starlette, with the chat request answered by `ChatLane` before any of Starlette's layers,
    unless the user added middleware of their own (`add_middleware`): that sees every request."""

    def __init__(self, *, lane: ASGIApp, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lane = lane
        self.own_middleware = len(self.user_middleware)

    def starts_without_task(self, scope: Scope) -> bool:
        """Whether the mock's server may run `scope`'s first steps in no task
        (`cycle.STARTS_WITHOUT_TASK`): a request for the chat lane, which reaches anything that
        needs a task only after `cycle.in_task`."""
        return chat.serves(scope) and len(self.user_middleware) == self.own_middleware

    def answer_at_once(self, scope: Scope, body: bytes, send_whole: Callable[[bytes, bytes], None]) -> bool:
        """Whether `scope` (a chat request `starts_without_task` says yes to) was answered there and
        then (`cycle.ANSWERS_AT_ONCE`, `chat_at_once.answer`), with the lane's metrics."""
        lane = self.lane
        return isinstance(lane, chat.ChatLane) and chat_at_once.answer(
            self.state._state, scope, body, send_whole, lane.record)

    def might_answer_at_once(self, scope: Scope, length: int) -> bool:
        """Whether `answer_at_once` might answer `scope` with a body of `length` bytes, by its head
        (`cycle.MIGHT_ANSWER_AT_ONCE`, `chat_at_once.may_hold`)."""
        lane = self.lane
        return isinstance(lane, chat.ChatLane) and chat_at_once.may_hold(self.state._state, scope, length)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The chat lane for a chat request (when no user middleware must see it), else Starlette;
        # the app picked, not a coroutine of its own: one fewer per request.
        lane = chat.serves(scope) and len(self.user_middleware) == self.own_middleware
        if lane:
            scope["app"] = self
        app = self.lane if lane else super().__call__
        if scope["type"] == "http" and scope["method"] == "POST":
            large = off_loop.declared_large(scope, keep=lane)
            if large is None:  # chunked: read that far to know
                large, receive = await off_loop.large(scope, receive)
            # The MCP server stays on the loop its SDK's sessions run on.
            if large and not _MCP_PATH.match(scope["path"]):
                await in_task()
                await off_loop.serve(app, scope, receive, send)
                return
        await app(scope, receive, send)


ROUTES = [
    *chat.ROUTES,
    Route("/v1/models", models, methods=["GET"]),
    Route("/o/{options}/v1/models", models, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics_page, methods=["GET"]),
    Route("/journal", request_journal, methods=["GET"]),
    *responses.ROUTES,
    *embeddings.ROUTES,
    *anthropic.ROUTES,
    *gemini_embed.ROUTES,
    *gemini.ROUTES,
    *ollama_embed.ROUTES,
    *ollama.ROUTES,
    *azure.ROUTES,
    *bedrock_embed.ROUTES,
    *bedrock.ROUTES,
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
    metrics = Metrics()
    app = MockApp(
        lane=chat.ChatLane(defaults, _server_error, metrics.requests.record),
        routes=ROUTES,
        middleware=[Middleware(CountRequests, metrics=metrics), Middleware(ApiHeaders, defaults=defaults)],
        exception_handlers={
            APIError: api_error,
            ClientGone: client_gone,
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
    app.state.attempts = attempts.Attempts()  # made here: two threads may count at once (`off_loop`)
    app.state.tests = {}  # test id -> Config: a shared mock's per-test set-up (`steps.config_of`)
    app.state.metrics = metrics
    # An MCP session serves its test's set-up on a shared mock (`mcp.host.TEST`), else the server's.
    setattr(app.state, mcp_endpoint.STATE,
            McpHost(lambda: app.state.tests.get(TEST.get()) or app.state.config,
                    lambda scope: test_id(Request(scope))))
    return app


def app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` and multi-worker serving, configured by MOCK_* variables."""
    if (lines := os.environ.get(LOG_LINES)) is not None:
        if lines not in ("0", "1"):
            raise ValueError(f"{LOG_LINES}: expected 0 (quiet) or 1 (a line per request), got {lines!r}")
        print_log_lines(lines == "1")
    return create_app(
        latency_ms=float(os.environ.get("MOCK_LATENCY_MS", "0")),
        api_key=os.environ.get("MOCK_API_KEY") or None,
        max_body_bytes=int(os.environ.get("MOCK_MAX_BODY_BYTES", "1000000")),
        scenario_files=paths_from_env(os.environ.get("MOCK_SCENARIOS")),
        journal=int(os.environ.get("MOCK_JOURNAL", "0")),
        mcp_ledger=os.environ.get("MOCK_MCP_LEDGER") or None,
    )
