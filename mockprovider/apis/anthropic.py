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

import base64
import hashlib
import json
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.shared import (
    ChatShaped,
    as_json,
    body_object,
    chat_tool,
    json_response,
    model_of,
    scripted_turn,
    sse_event,
    streamed,
    string,
    suffix,
    tool_call,
)
from mockprovider.apis.steps import config_of, read_json
from mockprovider.errors import APIError, ScriptedError, invalid, missing
from mockprovider.reading.validation import flag, positive_int
from mockprovider.replies import caching, completions, tool_choice
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
BLOCKS = {"user": ("text", "tool_result"), "assistant": ("text", "tool_use", "thinking", "redacted_thinking")}


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


# --- the request, in chat shape -------------------------------------------------------------


def _text_blocks(value: Any, param: str) -> str:
    """A string, or an array of text blocks, as one string."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise invalid(f"{param}: expected a string or an array of text blocks.", param=param)
    texts = []
    for j, block in enumerate(value):
        if not (isinstance(block, dict) and block.get("type") == "text"):
            raise invalid(f"{param}[{j}]: this mock reads text blocks only.", param=f"{param}[{j}]")
        texts.append(string(block.get("text"), f"{param}[{j}].text"))
    return "".join(texts)


def _blocks(message: dict[str, Any], p: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise invalid(f"{p}.content: expected a string or a non-empty array of blocks.", param=f"{p}.content")
    allowed = BLOCKS[message["role"]]
    for j, block in enumerate(content):
        if not (isinstance(block, dict) and block.get("type") in allowed):
            kind = block.get("type") if isinstance(block, dict) else block
            raise invalid(
                f"{p}.content[{j}]: block type {kind!r} is not readable here; a {message['role']} "
                f"message may hold {' and '.join(allowed)} blocks.",
                param=f"{p}.content[{j}]",
            )
    return content


def _assistant(blocks: list[dict[str, Any]], p: str, seen: list[str]) -> dict[str, Any]:
    texts, calls = [], []
    for j, block in enumerate(blocks):
        q = f"{p}.content[{j}]"
        if block["type"] == "text":
            texts.append(string(block.get("text"), f"{q}.text"))
            continue
        if block["type"] in ("thinking", "redacted_thinking"):
            continue  # earlier thinking, sent back as the API asks: not part of the prompt here
        call_id = string(block.get("id"), f"{q}.id")
        arguments = block.get("input")
        if not isinstance(arguments, dict):
            raise invalid(f"{q}.input: expected an object.", param=f"{q}.input")
        # Compact and unescaped, as the chat route sends a call's arguments, so the same call
        # fed back counts the same tokens in both formats.
        calls.append(tool_call(call_id, string(block.get("name"), f"{q}.name"),
                               json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)))
        seen.append(call_id)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user(blocks: list[dict[str, Any]], i: int, expected: list[str]) -> list[dict[str, Any]]:
    """`messages[i]`'s blocks, a user message's; its tool_result blocks answer `expected`, the
    tool_use ids of the message before it, each once (removed from `expected` as they are
    answered), and come before its text: a result after text does not follow its call
    immediately, and the real API refuses it as unanswered (docs/conformance.md)."""
    results, texts, answered = [], [], set()
    p = f"messages[{i}]"
    dotted = p.replace("[", ".").replace("]", "")  # Anthropic writes paths as messages.3.content.0
    for j, block in enumerate(blocks):
        q = f"{p}.content[{j}]"
        if block["type"] == "text":
            texts.append(string(block.get("text"), f"{q}.text"))
            continue
        if texts and expected:
            raise _unanswered(i - 1, expected)
        call_id = string(block.get("tool_use_id"), f"{q}.tool_use_id")
        if call_id in answered:
            raise invalid(
                f"{dotted}.content.{j}: each tool_use must have a single result. Found multiple "
                f"`tool_result` blocks with id: {call_id}",
                param=f"{q}.tool_use_id",
            )
        if call_id not in expected:
            raise invalid(
                f"{dotted}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. "
                "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
                "message.",
                param=f"{q}.tool_use_id",
            )
        expected.remove(call_id)
        answered.add(call_id)
        output = block.get("content")
        text = "" if output is None else _text_blocks(output, f"{q}.content")
        results.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return results + ([{"role": "user", "content": "".join(texts)}] if texts else [])


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise missing("messages")
    if not isinstance(value, list) or not value:
        raise invalid("messages: expected a non-empty array of messages.", param="messages")
    out: list[dict[str, Any]] = []
    expected: list[str] = []  # the previous assistant message's tool_use ids, until answered
    for i, message in enumerate(value):
        p = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(f"{p}: expected an object.", param=p)
        role = message.get("role")
        if role not in ("user", "assistant"):  # not `in BLOCKS`: a role may be unhashable
            raise invalid(f"{p}.role: {role!r}; expected 'user' or 'assistant'.", param=f"{p}.role")
        blocks = _blocks(message, p)
        if message["role"] == "assistant":
            if expected:
                raise _unanswered(i - 1, expected)
            out.append(_assistant(blocks, p, expected))
        else:
            out.extend(_user(blocks, i, expected))
            if expected:
                raise _unanswered(i - 1, expected)
    if expected:
        raise _unanswered(len(value) - 1, expected)
    return out


def _unanswered(i: int, ids: list[str]) -> APIError:
    """Anthropic's own wording (docs/conformance.md cites where it was seen)."""
    return invalid(
        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
        "message.",
        param=f"messages[{i}]",
    )


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("tools: expected an array of objects.", param="tools")
    tools = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            raise invalid(f"{p}: this mock serves client tools only (name, input_schema).", param=p)
        if not isinstance(tool.get("input_schema"), dict):
            raise invalid(f"{p}.input_schema: expected an object.", param=f"{p}.input_schema")
        tools.append(chat_tool(tool.get("name"), tool.get("description"), tool["input_schema"], p))
    return tools


def messages_request(raw: Any) -> ChatShaped:
    """A validated request in chat shape; `APIError` naming the offending field otherwise."""
    body = body_object(raw)
    model = model_of(body)
    max_tokens = positive_int(body, "max_tokens")
    if max_tokens is None:
        raise missing("max_tokens")
    system = body.get("system")
    messages = [] if system is None else [{"role": "system", "content": _text_blocks(system, "system")}]
    tools = _tools(body.get("tools"))
    choice = tool_choice.messages_choice(body.get("tool_choice"))
    tool_choice.check(choice, tools)
    return ChatShaped(
        model=model,
        messages=messages + _messages(body.get("messages")),
        tools=tools,
        max_tokens=max_tokens,
        stream=flag(body, "stream"),
        cache_breakpoints=caching.breakpoints(body),
        tool_choice=choice,
    )


# --- the reply ------------------------------------------------------------------------------


def _input(arguments: str) -> dict[str, Any]:
    """A tool call's input; `{}` when a `max_tokens` cut left its JSON unfinished."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _signature(text: str) -> str:
    """An opaque signature for a thinking block, as the API attaches one (the SDKs keep it)."""
    return base64.b64encode(hashlib.sha256(f"mockprovider:{text}".encode()).digest()).decode()


def _thinking(c: completions.Completion) -> list[dict[str, Any]]:
    """The thinking block a reasoning reply starts with (redacted when only a count was given)."""
    if not c.reasoning_tokens:
        return []
    if c.reasoning is None:
        return [{"type": "redacted_thinking", "data": _signature(str(c.reasoning_tokens))}]
    return [{"type": "thinking", "thinking": c.reasoning, "signature": _signature(c.reasoning)}]


def _content(c: completions.Completion) -> list[dict[str, Any]]:
    return _thinking(c) + _reply_content(c)


def _reply_content(c: completions.Completion) -> list[dict[str, Any]]:
    """The reply's blocks: the text first (when there is any), then a tool_use per call. A reply
    cut while thinking has no text block: the API never sends an empty one after thinking."""
    shown = c.content is not None or not (c.tool_calls or c.reasoning_tokens)
    text = [{"type": "text", "text": c.content or ""}] if shown else []
    return text + [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
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


def _streamed_input(arguments: str) -> str:
    """The JSON the input_json_delta events carry: the arguments when they are an object, else
    `{}`, the input `_content` gives (a client parses every delta as the prefix of an object)."""
    return arguments if _input(arguments) else "{}"


def _block_events(
    index: int, block: dict[str, Any], arguments: str, chunk: int
) -> Iterator[tuple[str, dict[str, Any], int]]:
    """One content block's events; `arguments` is a tool_use block's call as the script wrote it."""
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        deltas = [({"type": "input_json_delta", "partial_json": p}, tokens)
                  for p, tokens in completions.weighed_deltas(_streamed_input(arguments), chunk)]
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
    req = messages_request(await read_json(request, config))
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


# Every method reaches `messages`, so a wrong one is refused in Anthropic's shape too.
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [
    Route("/v1/messages", messages, methods=_METHODS),
    Route("/o/{options}/v1/messages", messages, methods=_METHODS),
]
