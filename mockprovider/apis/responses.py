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
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.responses_request import ResponsesRequest, responses_request
from mockprovider.apis.shared import (
    as_json,
    scripted_turn,
    sse_event,
    streamed,
    suffix,
)
from mockprovider.apis.steps import config_of, read_json
from mockprovider.errors import APIError
from mockprovider.replies import completions

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
    return await answer(request, await read_json(request, config_of(request), whole_unicode=True))


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
