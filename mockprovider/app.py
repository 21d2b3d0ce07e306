"""The Starlette app: routes, authentication, and one request's path through the mock.

A chat request goes: auth → body read under a size cap → validation → options (server
defaults, base-URL prefix, model suffix, header) → scenario lookup → latency → fault, if one
applies to this (turn, attempt) → the scripted reply, cut and counted → JSON or SSE.

The endpoints are module-level functions; everything they need per server (defaults, key,
limits, the scenario table) is a frozen `Config` on `app.state.config`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import os
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import o200k
from mockprovider import faults, scenarios, wire
from mockprovider.errors import APIError
from mockprovider.faults import Fault, Options
from mockprovider.journal import Journal, headers_of
from mockprovider.scenario_files import Source, load_scenarios, paths_from_env
from mockprovider.scenarios import Scenario
from mockprovider.validation import ChatRequest, chat_request, parse_json

log = logging.getLogger("mockprovider")

HANG_LIMIT_S = 300.0
"""A hung response waits for the client to give up, but never longer than this."""


@dataclass(frozen=True, kw_only=True)
class Config:
    """One server's settings; per-request options override `defaults`."""

    defaults: Options = field(default_factory=Options)
    api_key: str | None = None
    """When set, /v1/* requires `Authorization: Bearer <api_key>`."""
    max_body_bytes: int = 1_000_000
    scenarios: Mapping[str, Scenario] = field(default_factory=lambda: dict(scenarios.SCENARIOS))
    """Every model name this server answers to: the built-ins and any scenario files."""
    journal: Journal | None = None
    """When set, every request body read is recorded (observed only, never read by a scenario)."""


def config_of(request: Request) -> Config:
    return request.app.state.config


# --- the steps every wire format shares ----------------------------------------------------


def authorize(request: Request, config: Config) -> None:
    if config.api_key is None:
        return
    # Anthropic's clients send the key as x-api-key; every other client as a bearer token.
    key = request.headers.get("x-api-key")
    given = f"Bearer {key}" if key is not None else request.headers.get("authorization", "")
    if not given:
        raise APIError(
            401,
            "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY' "
            "(or 'x-api-key: YOUR_KEY').",
            code="missing_api_key",
        )
    if not hmac.compare_digest(given.encode(), f"Bearer {config.api_key}".encode()):
        raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")


def _check_content_type(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise APIError(
            415,
            f"Unsupported content type {media or '(none)'!r}; send 'application/json'.",
            code="unsupported_media_type",
        )


def _too_large(limit: int) -> APIError:
    return APIError(413, f"Request body is larger than the limit of {limit} bytes.", code="request_too_large")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, config: Config) -> Any:
    """The request's JSON body, after auth, content type and the size cap."""
    authorize(request, config)
    _check_content_type(request)
    body = parse_json(await _read_body(request, config.max_body_bytes))
    if config.journal is not None:
        headers = headers_of(request.headers.items())
        config.journal.record(method=request.method, path=request.url.path, headers=headers, body=body)
    return body


def resolve(request: Request, config: Config, model: str) -> tuple[Scenario, Options]:
    """The scenario a model name selects and the options in force for this request.

    Later sources override earlier ones: server defaults < the scenario file's `options` <
    base-URL path < model suffix < header.
    """
    name, _, suffix = model.partition("+")
    script = config.scenarios.get(name)
    if script is None:
        known = ", ".join(config.scenarios)
        raise APIError(
            404,
            f"The model {name!r} does not exist; known scenarios: {known}. {faults.SYNTAX}.",
            param="model",
            code="model_not_found",
        )
    # Only file scenarios carry options (checked when the file was loaded); a built-in has none.
    options = faults.apply(config.defaults, getattr(script, "options", ""), param="model")
    options = faults.apply(options, request.path_params.get("options", ""), param="base_url")
    options = faults.apply(options, suffix, param="model")
    options = faults.apply(options, request.headers.get("x-mock-options", ""), param="x-mock-options")
    return script, options


async def delay_or_fault(request: Request, model: str, turn: int, options: Options) -> Fault | None:
    """Wait the configured latency; the fault that answers this (turn, attempt), if any."""
    attempt = faults.attempt_of(request.headers)
    fault = options.fault_for(turn, attempt)
    log.info("model=%s turn=%d attempt=%d status=%s", model, turn, attempt, fault.kind if fault else "ok")
    if options.latency_ms:
        await asyncio.sleep(options.latency_ms / 1000)
    return fault


async def hang(request: Request) -> None:
    """Send nothing until the client gives up (or HANG_LIMIT_S passes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_LIMIT_S
    # Polling is the only way to notice a disconnect without consuming the (already read) body.
    while loop.time() < deadline and not await request.is_disconnected():  # noqa: ASYNC110
        await asyncio.sleep(0.05)


MALFORMED_BODY = b'{"id": "chatcmpl-malformed", "choices": [{"index": 0, "mess'
"""What the `malformed` fault sends: JSON cut off mid-object, with status 200."""


async def injected(request: Request, fault: Fault, options: Options) -> APIError | bytes:
    """What an injected fault answers: an error for the wire format to render, or a broken body."""
    match fault.kind:
        case "429":
            wait_s = options.retry_ms / 1000
            return APIError(
                429,
                "Rate limit reached (injected fault); retry after the interval in Retry-After.",
                type="requests",
                code="rate_limit_exceeded",
                headers={"retry-after": str(math.ceil(wait_s)), "retry-after-ms": str(options.retry_ms)},
            )
        case "500":
            return APIError(500, "The server had an error (injected fault).", type="server_error")
        case "401":
            return APIError(401, "Incorrect API key (injected fault).", code="invalid_api_key")
        case "hang":
            await hang(request)
            return APIError(504, "Hung response (injected fault) gave up.", type="server_error")
        case "malformed":
            return MALFORMED_BODY
        case _:
            assert_never(fault.kind)


# --- endpoints -----------------------------------------------------------------------------


async def _stream(completion: wire.Completion, req: ChatRequest, options: Options) -> AsyncIterator[bytes]:
    delay = 1 / options.rate_tps if options.rate_tps else 0.0
    for chunk in wire.chunks(completion, include_usage=req.include_usage):
        yield wire.sse(chunk)
        if delay and chunk["choices"] and chunk["choices"][0]["delta"].keys() - {"role", "refusal"}:
            await asyncio.sleep(delay)
    yield wire.sse("[DONE]")


async def chat_completions(request: Request) -> Response:
    config = config_of(request)
    req = chat_request(await read_json(request, config))
    script, options = resolve(request, config, req.model)
    conversation = scenarios.conversation(req.messages)
    fault = await delay_or_fault(request, req.model, conversation.turn, options)
    if fault is not None:
        out = await injected(request, fault, options)
        return out.response() if isinstance(out, APIError) else Response(out, media_type="application/json")
    completion = wire.complete(
        script(conversation),
        model=req.model,
        prompt_tokens=o200k.prompt_tokens(req.messages, req.tools),
        max_tokens=req.max_tokens,
    )
    if req.stream:
        return StreamingResponse(
            _stream(completion, req, options),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    return JSONResponse(wire.body(completion))


async def models(request: Request) -> Response:
    config = config_of(request)
    authorize(request, config)
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
    return Response(config.journal.render(), media_type="application/json")


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    message = f"{request.method} {request.url.path}: {exc.detail}"
    return APIError(exc.status_code, message, code=code, headers=dict(exc.headers or {})).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error")
    return APIError(500, f"Internal error in the mock: {type(exc).__name__}", type="server_error").response()


# The other wire formats build on the shared steps above, so they are imported only now.
from mockprovider import anthropic_api, responses_api  # noqa: E402

ROUTES = [
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/o/{options}/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/o/{options}/v1/models", models, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/journal", request_journal, methods=["GET"]),
    *responses_api.ROUTES,
    *anthropic_api.ROUTES,
]


def create_app(
    *,
    latency_ms: float = 0.0,
    api_key: str | None = None,
    max_body_bytes: int = 1_000_000,
    scenario_files: Iterable[Source] = (),
    journal: int = 0,
) -> Starlette:
    """The scripted provider. Server-wide defaults here; per-request options override them.

    `scenario_files`: files, folders or parsed dicts, served beside the built-ins (a bad one
    raises `ScenarioFileError` here, never per request). `journal`: keep the last N requests.
    """
    table = dict(scenarios.SCENARIOS) | load_scenarios(scenario_files)
    o200k.encoding()  # load the ranks now, not during the first request
    app = Starlette(
        routes=ROUTES,
        exception_handlers={APIError: _api_error, HTTPException: _http_error, Exception: _server_error},
    )
    app.state.config = Config(
        defaults=Options(latency_ms=latency_ms), api_key=api_key, max_body_bytes=max_body_bytes,
        scenarios=table, journal=Journal(journal) if journal else None,
    )
    return app


def app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` and multi-worker serving, configured by MOCK_* variables."""
    return create_app(
        latency_ms=float(os.environ.get("MOCK_LATENCY_MS", "0")),
        api_key=os.environ.get("MOCK_API_KEY") or None,
        max_body_bytes=int(os.environ.get("MOCK_MAX_BODY_BYTES", "1000000")),
        scenario_files=paths_from_env(os.environ.get("MOCK_SCENARIOS")),
        journal=int(os.environ.get("MOCK_JOURNAL", "0")),
    )
