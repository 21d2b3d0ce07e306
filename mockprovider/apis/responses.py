"""POST /v1/responses: OpenAI's Responses API over the same scripts, stateless.

The request becomes the chat conversation it stands for:

- `instructions`                  → a system message first
- `input` as a string             → one user message
- a `message` item                → a message of its role, its text parts joined
- `function_call` items           → the tool_calls of one assistant message (joined to the
                                    assistant message they directly follow: one response made them)
- a `function_call_output` item   → a tool message answering its `call_id`

So the turn index is the number of assistant turns in `input`, and `input_tokens` is the chat
formula over that conversation: what /v1/chat/completions bills for the same exchange.

Nothing is stored: `previous_response_id`, `conversation`, `store: true` and `background: true`
would need server memory and are refused with a 400 that says to send the whole input.
Errors are OpenAI-shaped, as on the chat route.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.shared import (
    ChatShaped,
    as_json,
    body_object,
    chat_tool,
    model_of,
    scripted_turn,
    sse_event,
    streamed,
    string,
    suffix,
    tool_call,
)
from mockprovider.apis.steps import config_of, read_json
from mockprovider.errors import APIError, invalid, missing
from mockprovider.reading.validation import flag, positive_int
from mockprovider.replies import completions, tool_choice

ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text")
ITEMS = ("message", "function_call", "function_call_output", "reasoning")


def _stateless(param: str) -> APIError:
    return invalid(
        f"'{param}' needs a server that remembers earlier responses, and this mock is stateless: "
        "send the whole conversation in 'input' instead (earlier output items included).",
        param=param,
        code="stateless",
    )


@dataclass(frozen=True, kw_only=True)
class ResponsesRequest:
    chat: ChatShaped
    instructions: str | None
    tools: list[dict[str, Any]]
    """As the client sent them; the response echoes them."""
    tool_choice: Any
    """As the client sent it ("auto" when it sent none); the response echoes it."""


# --- the request, in chat shape -------------------------------------------------------------


def _text(content: Any, param: str) -> str:
    """A string, or an array of text parts, as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(f"Invalid type for '{param}': expected a string or an array of parts.", param=param)
    texts = []
    for j, part in enumerate(content):
        p = f"{param}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "refusal":
            texts.append(string(part.get("refusal"), f"{p}.refusal"))
        elif kind in TEXT_PARTS:
            texts.append(string(part.get("text"), f"{p}.text"))
        else:
            raise invalid(
                f"Invalid '{p}': this mock reads text parts only ({', '.join(TEXT_PARTS)}, refusal).", param=p
            )
    return "".join(texts)


def _message(item: dict[str, Any], p: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in ROLES:
        raise invalid(
            f"Invalid value for '{p}.role': {role!r}. Supported values are: {', '.join(ROLES)}.",
            param=f"{p}.role",
            code="invalid_value",
        )
    return {"role": role, "content": _text(item.get("content"), f"{p}.content")}


def _input_messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise missing("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise invalid("Invalid 'input': expected a string or a non-empty array of items.", param="input")
    messages: list[dict[str, Any]] = []
    calls: set[str] = set()
    unanswered: dict[str, int] = {}  # call_id -> its item's index, until an output answers it
    for i, item in enumerate(value):
        p = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(f"Invalid type for '{p}': expected an object.", param=p)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, p))
        elif kind == "function_call":
            call_id = string(item.get("call_id"), f"{p}.call_id")
            name = string(item.get("name"), f"{p}.name")
            call = tool_call(call_id, name, string(item.get("arguments"), f"{p}.arguments"))
            if not (messages and messages[-1]["role"] == "assistant"):
                messages.append({"role": "assistant", "content": None})
            messages[-1].setdefault("tool_calls", []).append(call)
            calls.add(call_id)
            unanswered[call_id] = i
        elif kind == "function_call_output":
            call_id = string(item.get("call_id"), f"{p}.call_id")
            if unanswered.pop(call_id, None) is None:
                raise _duplicate_output(call_id, p) if call_id in calls else _orphan_output(call_id)
            output = _text(item.get("output"), f"{p}.output")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif kind == "reasoning":
            continue  # earlier reasoning, sent back as the API asks: not part of the prompt here
        elif kind == "item_reference":
            raise _stateless(f"{p}.id")
        else:
            raise invalid(
                f"Invalid '{p}.type': {kind!r}; this mock reads {', '.join(ITEMS)} items.", param=f"{p}.type"
            )
    if unanswered:
        raise invalid(f"No tool output found for function call {next(iter(unanswered))}.", param="input")
    return messages


# The real API's wording and `param` (docs/conformance.md cites where each was seen).


def _orphan_output(call_id: str) -> APIError:
    return invalid(f"No tool call found for function call output with call_id {call_id}.", param="input")


def _duplicate_output(call_id: str, p: str) -> APIError:
    return invalid(
        f"Duplicate function call output for call_id {call_id}: '{p}' answers a function call that an "
        "earlier function_call_output item already answered.",
        param="input",
    )


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("Invalid 'tools': expected an array of objects.", param="tools")
    tools = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise invalid(f"Invalid '{p}': this mock serves function tools only.", param=p)
        name, description, schema = tool.get("name"), tool.get("description"), tool.get("parameters")
        tools.append(chat_tool(name, description, schema, p, strict=tool.get("strict")))
    return tools


MIN_OUTPUT_TOKENS = 16
"""The spec's minimum for `max_output_tokens`; the real API answers 400 below it."""


def _max_output_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_output_tokens")
    # Any integer below the minimum, 0 and negatives included, is refused in the API's words.
    if isinstance(value, int) and not isinstance(value, bool) and value < MIN_OUTPUT_TOKENS:
        raise invalid(
            f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
            f"{MIN_OUTPUT_TOKENS}, but got {value} instead.",
            param="max_output_tokens",
            code="integer_below_min_value",
        )
    return positive_int(body, "max_output_tokens")


def responses_request(raw: Any) -> ResponsesRequest:
    """A validated request; `APIError` naming the offending parameter otherwise."""
    body = body_object(raw)
    model = model_of(body)
    for key in ("previous_response_id", "conversation"):
        if body.get(key) is not None:
            raise _stateless(key)
    for key in ("store", "background"):
        if flag(body, key):
            raise _stateless(key)
    instructions = body.get("instructions")
    messages = []
    if instructions is not None:
        messages.append({"role": "system", "content": string(instructions, "instructions")})
    messages += _input_messages(body.get("input"))
    if not messages:
        raise invalid(
            "Invalid 'input': it holds reasoning items only, which are not part of the prompt here; "
            "send the messages and function calls they belong to.",
            param="input",
        )
    tools = _tools(body.get("tools"))
    choice = tool_choice.responses_choice(body.get("tool_choice"))
    tool_choice.check(choice, tools)
    chat = ChatShaped(
        model=model,
        messages=messages,
        tools=tools,
        max_tokens=_max_output_tokens(body),
        stream=flag(body, "stream"),
        tool_choice=choice,
        paired=True,  # an output may come anywhere after its call
    )
    return ResponsesRequest(
        chat=chat, instructions=instructions, tools=[_echoed(t) for t in body.get("tools") or []],
        tool_choice=body.get("tool_choice") or "auto",
    )


def _echoed(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the Response object echoes it: a function tool always carries `parameters` and
    `strict` (the spec's FunctionTool requires both; the API's default for `strict` is true)."""
    if tool.get("type") != "function":
        return tool
    return {**tool, "parameters": tool.get("parameters"), "strict": tool.get("strict", True)}


# --- the response ---------------------------------------------------------------------------


def _output(c: completions.Completion) -> list[dict[str, Any]]:
    """The output items, a reasoning item first if the model reasoned."""
    if not c.reasoning_tokens:
        return _reply_items(c)
    summary = [{"type": "summary_text", "text": c.reasoning}] if c.reasoning else []
    return [{"id": f"rs_{suffix(c)}", "type": "reasoning", "summary": summary}, *_reply_items(c)]


def _reply_items(c: completions.Completion) -> list[dict[str, Any]]:
    """The reply's items; when the reply was cut, its last item is the incomplete one."""
    cut = c.finish_reason == "length"
    items: list[dict[str, Any]] = []
    if c.content is not None:  # text first, as a model writes it before its calls
        part = {"type": "output_text", "text": c.content, "annotations": [], "logprobs": []}
        items.append({"id": f"msg_{suffix(c)}", "type": "message", "role": "assistant",
                      "status": "incomplete" if cut and not c.tool_calls else "completed", "content": [part]})
    last = len(c.tool_calls) - 1
    items += [
        {"id": f"fc_{suffix(c)}_{i}", "type": "function_call",
         "status": "incomplete" if cut and i == last else "completed",
         "call_id": call.id, "name": call.name, "arguments": call.arguments}
        for i, call in enumerate(c.tool_calls)
    ]
    return items


def _usage(c: completions.Completion) -> dict[str, Any]:
    return {
        "input_tokens": c.prompt_tokens,
        "input_tokens_details": {"cached_tokens": c.cache.read, "cache_write_tokens": c.cache.write},
        "output_tokens": c.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": c.reasoning_tokens},
        "total_tokens": c.prompt_tokens + c.completion_tokens,
    }


def _response(c: completions.Completion, req: ResponsesRequest, *, done: bool) -> dict[str, Any]:
    """The `response` object: finished (`done`), or as it stands when a stream starts.

    `usage` is left out until the end (the spec's `ResponseUsage` is not nullable) and `user`
    always (the spec's `user` is a string and this mock has none to echo).
    """
    status = ("incomplete" if c.finish_reason == "length" else "completed") if done else "in_progress"
    out = {
        "id": f"resp_{suffix(c)}",
        "object": "response",
        "created_at": c.created,
        "status": status,
        "completed_at": c.created if status == "completed" else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": req.instructions,
        "max_output_tokens": req.chat.max_tokens,
        "model": c.model,
        "output": _output(c) if done else [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": req.tool_choice,
        "tools": req.tools,
        "top_p": 1.0,
        "truncation": "disabled",
        "metadata": {},
    }
    if done:
        out["usage"] = _usage(c)
    return out


def _item_events(index: int, item: dict[str, Any], chunk: int) -> Iterator[tuple[str, dict[str, Any], int]]:
    """One output item's events: added, its deltas (`chunk` tokens each), done."""
    at = {"item_id": item["id"], "output_index": index}
    if item["type"] == "reasoning":
        yield "response.output_item.added", {"output_index": index, "item": {**item, "summary": []}}, 0
        for number, part in enumerate(item["summary"]):
            part_at = {**at, "summary_index": number}
            yield "response.reasoning_summary_part.added", {**part_at, "part": {**part, "text": ""}}, 0
            for piece in completions.deltas(part["text"], chunk):
                yield "response.reasoning_summary_text.delta", {**part_at, "delta": piece}, chunk
            yield "response.reasoning_summary_text.done", {**part_at, "text": part["text"]}, 0
            yield "response.reasoning_summary_part.done", {**part_at, "part": part}, 0
    elif item["type"] == "message":
        part, text_at = item["content"][0], {**at, "content_index": 0}
        started = {**item, "status": "in_progress", "content": []}
        yield "response.output_item.added", {"output_index": index, "item": started}, False
        yield "response.content_part.added", {**text_at, "part": {**part, "text": ""}}, False
        for piece, tokens in completions.weighed_deltas(part["text"], chunk):
            yield "response.output_text.delta", {**text_at, "delta": piece, "logprobs": []}, tokens
        yield "response.output_text.done", {**text_at, "text": part["text"], "logprobs": []}, False
        yield "response.content_part.done", {**text_at, "part": part}, False
    else:
        started = {**item, "status": "in_progress", "arguments": ""}
        yield "response.output_item.added", {"output_index": index, "item": started}, False
        for piece, tokens in completions.weighed_deltas(item["arguments"], chunk):
            yield "response.function_call_arguments.delta", {**at, "delta": piece}, tokens
        yield "response.function_call_arguments.done", {**at, "name": item["name"],
                                                        "arguments": item["arguments"]}, False
    yield "response.output_item.done", {"output_index": index, "item": item}, False


def events(c: completions.Completion, req: ResponsesRequest) -> Iterator[tuple[bytes, int]]:
    """The documented event sequence, numbered; the last is `response.completed` or `.incomplete`."""
    started = _response(c, req, done=False)
    final = _response(c, req, done=True)

    def sequence() -> Iterator[tuple[str, dict[str, Any], int]]:
        yield "response.created", {"response": started}, False
        yield "response.in_progress", {"response": started}, False
        for index, item in enumerate(final["output"]):
            yield from _item_events(index, item, c.chunk)
        yield f"response.{final['status']}", {"response": final}, False

    for number, (name, data, is_token) in enumerate(sequence()):
        yield sse_event(name, {"type": name, **data, "sequence_number": number}), is_token


def _failed(c: completions.Completion, req: ResponsesRequest, number: int) -> bytes:
    """The `response.failed` event a stream ends with when the server fails mid-reply, after
    `number` events; a stream failed before its first still opens with `response.created`, as
    every Responses stream does (the SDK's stream helper refuses one that does not)."""
    started, opened = _response(c, req, done=False), b""
    if number == 0:
        created = {"type": "response.created", "response": started, "sequence_number": 0}
        opened, number = sse_event("response.created", created), 1
    failed = {**started, "status": "failed",
              "error": {"code": "server_error", "message": "The server had an error while processing "
                                                          "your request (injected fault)."}}
    data = {"type": "response.failed", "response": failed, "sequence_number": number}
    return opened + sse_event("response.failed", data)


async def responses(request: Request) -> Response:
    return await answer(request, await read_json(request, config_of(request)))


async def answer(request: Request, body: Any) -> Response:
    """The reply to a Responses request whose JSON `body` was read (Azure's routes read it too)."""
    config = config_of(request)
    req = responses_request(body)
    turn = await scripted_turn(request, config, req.chat, midstream_faults=True)
    if isinstance(turn, APIError):
        return turn.response()
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    if req.chat.stream:
        return streamed(turn, events(turn.completion, req), lambda n: _failed(turn.completion, req, n))
    return as_json(turn, _response(turn.completion, req, done=True))


ROUTES = [
    Route("/v1/responses", responses, methods=["POST"]),
    Route("/o/{options}/v1/responses", responses, methods=["POST"]),
]
