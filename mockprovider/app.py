"""The Starlette app: routes, authentication, and one request's path through the mock.

A chat request goes: auth → body read under a size cap → validation → options (server
defaults, base-URL prefix, model suffix, header) → scenario lookup → latency → fault, if one
applies to this (turn, attempt) → the scripted reply, cut and counted → JSON or SSE.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mockprovider import faults, scenarios, tokens, wire
from mockprovider.errors import APIError
from mockprovider.faults import Fault, Options
from mockprovider.validation import ChatRequest, chat_request, parse_json

log = logging.getLogger("mockprovider")

HANG_LIMIT_S = 300.0
"""A hung response waits for the client to give up, but never longer than this."""


def _unknown_model(name: str) -> APIError:
    known = ", ".join(scenarios.SCENARIOS)
    return APIError(
        404,
        f"The model {name!r} does not exist; known scenarios: {known}. {faults.SYNTAX}.",
        param="model",
        code="model_not_found",
    )


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


def _too_large(limit: int) -> APIError:
    return APIError(413, f"Request body is larger than the limit of {limit} bytes.", code="request_too_large")


def _check_content_type(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise APIError(
            415,
            f"Unsupported content type {media or '(none)'!r}; send 'application/json'.",
            code="unsupported_media_type",
        )


def _fault_response(fault: Fault, options: Options) -> Response:
    if fault.kind == "429":
        wait_s = options.retry_ms / 1000
        return APIError(
            429,
            "Rate limit reached (injected fault); retry after the interval in Retry-After.",
            type="requests",
            code="rate_limit_exceeded",
            headers={"retry-after": str(math.ceil(wait_s)), "retry-after-ms": str(options.retry_ms)},
        ).response()
    if fault.kind == "500":
        return APIError(500, "The server had an error (injected fault).", type="server_error").response()
    if fault.kind == "401":
        return APIError(401, "Incorrect API key (injected fault).", code="invalid_api_key").response()
    if fault.kind == "malformed":
        truncated = b'{"id": "chatcmpl-malformed", "choices": [{"index": 0, "mess'
        return Response(truncated, media_type="application/json")
    raise AssertionError(f"fault {fault.kind} has no response")


async def _hang(request: Request) -> Response:
    """Send nothing until the client gives up (or HANG_LIMIT_S passes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_LIMIT_S
    # Polling is the only way to notice a disconnect without consuming the (already read) body.
    while loop.time() < deadline and not await request.is_disconnected():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    return APIError(504, "Hung response (injected fault) gave up.", type="server_error").response()


async def _stream(
    completion: wire.Completion, req: ChatRequest, options: Options
) -> AsyncIterator[bytes]:
    delay = 1 / options.rate_tps if options.rate_tps else 0.0
    for chunk in wire.chunks(completion, include_usage=req.include_usage):
        yield wire.sse(chunk)
        if delay and chunk["choices"] and chunk["choices"][0]["delta"].keys() - {"role", "refusal"}:
            await asyncio.sleep(delay)
    yield wire.sse("[DONE]")


def create_app(
    *, latency_ms: float = 0.0, api_key: str | None = None, max_body_bytes: int = 1_000_000
) -> Starlette:
    """The scripted provider. Server-wide defaults here; per-request options override them."""
    defaults = Options(latency_ms=latency_ms)
    tokens.encoding()  # load the ranks now, not during the first request

    def authorize(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not given:
            raise APIError(
                401,
                "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'.",
                code="missing_api_key",
            )
        if not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")

    async def chat_completions(request: Request) -> Response:
        authorize(request)
        _check_content_type(request)
        req = chat_request(parse_json(await _read_body(request, max_body_bytes)))
        options = faults.apply(defaults, request.path_params.get("options", ""), param="base_url")
        name, _, suffix = req.model.partition("+")
        options = faults.apply(options, suffix, param="model")
        options = faults.apply(options, request.headers.get("x-mock-options", ""), param="x-mock-options")
        script = scenarios.SCENARIOS.get(name)
        if script is None:
            raise _unknown_model(name)

        conversation = scenarios.conversation(req.messages)
        attempt = faults.attempt_of(request.headers)
        fault = options.fault_for(conversation.turn, attempt)
        log.info(
            "model=%s turn=%d attempt=%d status=%s",
            req.model, conversation.turn, attempt, fault.kind if fault else "ok",
        )
        if options.latency_ms:
            await asyncio.sleep(options.latency_ms / 1000)
        if fault is not None:
            return await _hang(request) if fault.kind == "hang" else _fault_response(fault, options)

        completion = wire.complete(
            script(conversation),
            model=req.model,
            prompt_tokens=tokens.prompt_tokens(req.messages, req.tools),
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
        authorize(request)
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "mockprovider",
             "description": scenarios.describe(name)}
            for name in scenarios.SCENARIOS
        ]
        return JSONResponse({"object": "list", "data": data, "options": faults.SYNTAX})

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, APIError)
        return exc.response()

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return APIError(exc.status_code, message, code=code, headers=dict(exc.headers or {})).response()

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        message = f"Internal error in the mock: {type(exc).__name__}"
        return APIError(500, message, type="server_error").response()

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/o/{options}/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/o/{options}/v1/models", models, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={APIError: api_error, HTTPException: http_error, Exception: server_error},
    )



def app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` and multi-worker serving, configured by MOCK_* variables."""
    import os

    return create_app(
        latency_ms=float(os.environ.get("MOCK_LATENCY_MS", "0")),
        api_key=os.environ.get("MOCK_API_KEY") or None,
        max_body_bytes=int(os.environ.get("MOCK_MAX_BODY_BYTES", "1000000")),
    )
