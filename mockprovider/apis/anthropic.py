"""POST /v1/messages: Anthropic's Messages API over the same scripts, stateless.

The request becomes the chat conversation it stands for:

- `system` (a string or text blocks)  → a system message first
- a user message                      → a tool message per `tool_result` block (answering its
                                        `tool_use_id`), then a user message of its text, if any
- an assistant message                → an assistant message of its text, with a tool call per
                                        `tool_use` block (the `input` as compact JSON arguments)
- `tools` (`name`, `description`, `input_schema`) → chat function definitions

So the turn index is the number of assistant messages, and `input_tokens` is the chat formula
over that conversation. `max_tokens` is required, as Anthropic requires it. Every error, the
shared steps' included (auth, body limits, unknown model, injected faults), is rendered in
Anthropic's shape `{"type": "error", "error": {"type", "message"}}` with the status code
Anthropic documents for that type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.anthropic_request import messages_request
from mockprovider.apis.shared import (
    as_json,
    json_response,
    reasoning_signature,
    scripted_turn,
    sse_event,
    streamed,
    streamed_input,
    suffix,
    tool_input,
)
from mockprovider.apis.steps import config_of, read_json, resolve
from mockprovider.errors import APIError, ScriptedError
from mockprovider.reading import transcript
from mockprovider.replies import completions
from mockprovider.replies.headers import request_id

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def stream_error(request: Request) -> bytes:
    """What Anthropic sends when a stream fails after it started, with the request's id."""
    error = {"type": "overloaded_error", "message": "Overloaded (injected fault)."}
    return sse_event("error", {"type": "error", "error": error, "request_id": request_id(request.scope)})


def error_response(e: APIError, request: Request | None = None) -> Response:
    """`e` in Anthropic's shape, with the request's id when known; other 4xx are
    `invalid_request_error`, as Anthropic documents."""
    kind = ERROR_TYPES.get(e.status, "invalid_request_error" if e.status < 500 else "api_error")
    if isinstance(e, ScriptedError) and e.given_type:
        kind = e.type
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": e.message}}
    if request is not None:
        body["request_id"] = request_id(request.scope)
    return json_response(body, status=e.status, headers=e.headers)


# --- the reply ------------------------------------------------------------------------------


def _thinking(c: completions.Completion) -> list[dict[str, Any]]:
    """The thinking block a reasoning reply starts with (redacted when only a count was given)."""
    if not c.reasoning_tokens:
        return []
    if c.reasoning is None:
        return [{"type": "redacted_thinking", "data": reasoning_signature(str(c.reasoning_tokens))}]
    return [{"type": "thinking", "thinking": c.reasoning, "signature": reasoning_signature(c.reasoning)}]


def _content(c: completions.Completion) -> list[dict[str, Any]]:
    return _thinking(c) + _reply_content(c)


def _reply_content(c: completions.Completion) -> list[dict[str, Any]]:
    """The reply's blocks: the text first (when there is any), then a tool_use per call. A reply
    cut while thinking has no text block: the API never sends an empty one after thinking."""
    shown = c.content is not None or not (c.tool_calls or c.reasoning_tokens)
    text = [{"type": "text", "text": c.content or ""}] if shown else []
    return text + [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call.arguments)}
        for call in c.tool_calls
    ]


def _message(c: completions.Completion, *, done: bool) -> dict[str, Any]:
    """The `message` object: finished (`done`), or as `message_start` announces it."""
    return {
        "id": f"msg_{suffix(c)}",
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": _content(c) if done else [],
        "stop_reason": STOP_REASONS[c.finish_reason] if done else None,
        "stop_sequence": None,
        "usage": {**_input_usage(c), "output_tokens": c.completion_tokens if done else 0,
                  "cache_creation": {"ephemeral_5m_input_tokens": c.cache.write_5m,
                                     "ephemeral_1h_input_tokens": c.cache.write_1h},
                  "service_tier": "standard", **_thinking_usage(c, done)},
    }


def _thinking_usage(c: completions.Completion, done: bool) -> dict[str, Any]:
    if not (done and c.reasoning_tokens):
        return {}
    return {"output_tokens_details": {"thinking_tokens": c.reasoning_tokens}}


def _input_usage(c: completions.Completion) -> dict[str, int]:
    """Input as Anthropic splits it: `input_tokens` is what neither read nor wrote the cache."""
    return {
        "input_tokens": c.prompt_tokens - c.cache.read - c.cache.write,
        "cache_creation_input_tokens": c.cache.write,
        "cache_read_input_tokens": c.cache.read,
    }


def _block_events(
    index: int, block: dict[str, Any], arguments: str, chunk: int
) -> Iterator[tuple[str, dict[str, Any], int]]:
    """One content block's events; `arguments` is a tool_use block's call as the script wrote it."""
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        deltas = [({"type": "input_json_delta", "partial_json": p}, tokens)
                  for p, tokens in completions.weighed_deltas(streamed_input(arguments), chunk)]
    elif block["type"] == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [({"type": "thinking_delta", "thinking": p}, tokens)
                  for p, tokens in completions.weighed_deltas(block["thinking"], chunk)]
        deltas.append(({"type": "signature_delta", "signature": block["signature"]}, 0))
    elif block["type"] == "redacted_thinking":
        start, deltas = block, []
    else:
        start = {"type": "text", "text": ""}
        deltas = [({"type": "text_delta", "text": p}, tokens)
                  for p, tokens in completions.weighed_deltas(block["text"], chunk)]
    yield "content_block_start", {"index": index, "content_block": start}, 0
    for delta, tokens in deltas:
        yield "content_block_delta", {"index": index, "delta": delta}, tokens
    yield "content_block_stop", {"index": index}, 0


def events(c: completions.Completion) -> Iterator[tuple[bytes, int]]:
    """message_start, each block's start / deltas / stop, message_delta, message_stop."""

    def sequence() -> Iterator[tuple[str, dict[str, Any], int]]:
        yield "message_start", {"message": _message(c, done=False)}, False
        blocks = _content(c)
        arguments = [""] * (len(blocks) - len(c.tool_calls)) + [call.arguments for call in c.tool_calls]
        for index, block in enumerate(blocks):
            yield from _block_events(index, block, arguments[index], c.chunk)
        delta = {"stop_reason": STOP_REASONS[c.finish_reason], "stop_sequence": None}
        usage = {**_input_usage(c), "output_tokens": c.completion_tokens, **_thinking_usage(c, True)}
        yield "message_delta", {"delta": delta, "usage": usage}, False
        yield "message_stop", {}, False

    for name, data, is_token in sequence():
        yield sse_event(name, {"type": name, **data}), is_token


async def _reply(request: Request) -> Response:
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    config = config_of(request)
    req = messages_request(await read_json(request, config, whole_unicode=True),
                           betas=request.headers.get("anthropic-beta", ""))
    turn = await scripted_turn(request, config, req, midstream_faults=True)
    if isinstance(turn, APIError):
        return error_response(turn, request)
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    if req.stream:
        return streamed(turn, events(turn.completion), lambda _: stream_error(request))
    return as_json(turn, _message(turn.completion, done=True))


async def messages(request: Request) -> Response:
    try:
        return await _reply(request)
    except APIError as e:
        return error_response(e, request)


async def _count(request: Request) -> Response:
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    config = config_of(request)
    req = messages_request(await read_json(request, config, whole_unicode=True), counting=True)
    resolve(request, config, req.model)  # an unknown model is a 404 here too
    read = transcript.read(req.messages, paired=req.paired)
    return json_response({"input_tokens": await transcript.prompt_tokens(read, req.tools)})


async def count_tokens(request: Request) -> Response:
    """POST /v1/messages/count_tokens: the prompt's tokens, by the formula a Messages reply's
    usage states (`input_tokens` there, plus whatever it read from or wrote to the cache)."""
    try:
        return await _count(request)
    except APIError as e:
        return error_response(e, request)


# Every method reaches `messages`, so a wrong one is refused in Anthropic's shape too.
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [
    Route("/v1/messages", messages, methods=_METHODS),
    Route("/o/{options}/v1/messages", messages, methods=_METHODS),
    Route("/v1/messages/count_tokens", count_tokens, methods=_METHODS),
    Route("/o/{options}/v1/messages/count_tokens", count_tokens, methods=_METHODS),
]
