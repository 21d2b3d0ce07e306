"""Ollama's API over the same scripts, stateless: `POST /api/chat`, `GET /api/tags`, `POST /api/show`.

The request's messages are already nearly the chat shape:

- `system`, `user`, `assistant` messages      → the same messages (text only)
- an assistant's `tool_calls` (`function` with `name` and an `arguments` object) → chat tool
  calls with the arguments as compact JSON; a call without an `id` (Ollama's Python client
  drops the ids the server sends) is named `call_{turn}_{index}`
- a `tool` message                            → a tool message answering its `tool_call_id`, or
                                                without one the earliest unanswered call (of its
                                                `tool_name`, if it has one): see `pairing`

So the turn index is the number of assistant messages and `prompt_eval_count` is the chat
formula over that conversation; `eval_count` is the reply's tokens. `options.num_predict` cuts
the reply when positive (`done_reason: "length"`); Ollama's -1 and -2 mean no limit.

The reply streams by default as NDJSON: one object per token of text (or one holding every
tool call, as Ollama sends them), then a last object with `done: true`, the `done_reason`, the
counts and the durations (nanoseconds, measured: `prompt_eval_duration` until the reply was
ready, latency included; `eval_duration` while it was sent). `stream: false` sends one object.
A stream that fails after it started (the `stream_error` fault) ends with an `{"error": "…"}`
line, which the ollama client raises mid-iteration.
A request with no messages loads the model, as Ollama's does (`done_reason: "load"`), or with
`keep_alive` 0 unloads it (`"unload"`).

Model names may carry Ollama's default tag (`plan:latest`, before or after the options). Errors
are Ollama's `{"error": "…"}` with the status code; like Ollama, any content type is read as
JSON (its curl examples send none).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
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
    streamed,
    string,
    tool_call,
)
from mockprovider.apis.steps import authorize, config_of, read_raw, resolve
from mockprovider.errors import APIError, ScriptedError, invalid, missing
from mockprovider.reading import attempts
from mockprovider.reading.pairing import Calls
from mockprovider.reading.validation import parse_body
from mockprovider.replies import completions
from mockprovider.scripts import scenarios

ROLES = ("system", "user", "assistant", "tool")
TAG = ":latest"
EPOCH = "1970-01-01T00:00:00Z"
"""Every scenario's `modified_at`: scripts have no build time, and listings stay reproducible."""


def error_response(e: APIError) -> Response:
    if e.status == 529 and not isinstance(e, ScriptedError):
        # The overload fault as Ollama sends it when its queue is full (it never sends a 529).
        return json_response({"error": "server busy, please try again.  maximum pending requests exceeded "
                                       "(injected fault)"}, status=503, headers=e.headers)
    return json_response({"error": e.message}, status=e.status, headers=e.headers)


def _parse(raw: bytes) -> Any:
    return parse_body(raw, unparsable="invalid JSON body: {error}")


def model_name(model: str) -> str:
    """The model name without Ollama's default tag, which may stand before or after the options
    (`plan:latest+latency=50`, as /api/tags lists the name, or `plan+latency=50:latest`)."""
    name, plus, options = model.removesuffix(TAG).partition("+")
    return name.removesuffix(TAG) + plus + options


# --- the request, in chat shape -------------------------------------------------------------


def _tool_calls(value: Any, p: str, turn: int, calls: Calls) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise invalid(f"{p}: expected an array of tool calls.", param=p)
    out = []
    for j, call in enumerate(value):
        q = f"{p}[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise invalid(f"{q}: a tool call holds a 'function' object.", param=q)
        name = string(function.get("name"), f"{q}.function.name")
        arguments = function.get("arguments", {})
        if not isinstance(arguments, dict):
            raise invalid(f"{q}.function.arguments: expected an object.", param=f"{q}.function.arguments")
        call_id = call.get("id")
        call_id = f"call_{turn}_{j}" if call_id is None else string(call_id, f"{q}.id")
        # Compact and unescaped, as the chat route sends a call's arguments, so the same call
        # fed back counts the same tokens in every format.
        out.append(tool_call(call_id, name, json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)))
        calls.add(call_id, name)
    return out


def _message(m: Any, p: str, turn: int, calls: Calls) -> dict[str, Any]:
    if not isinstance(m, dict):
        raise invalid(f"{p}: expected an object.", param=p)
    role = m.get("role")
    if role not in ROLES:  # not a set: a role may be unhashable
        raise invalid(f"{p}.role: {role!r}; expected one of {', '.join(ROLES)}.", param=f"{p}.role")
    content = m.get("content")
    content = None if content is None else string(content, f"{p}.content")
    if m.get("images"):
        raise invalid(f"{p}.images: this mock reads text only.", param=f"{p}.images")
    if role == "tool":
        call_id, name = m.get("tool_call_id"), m.get("tool_name")
        call_id = calls.answer(None if call_id is None else string(call_id, f"{p}.tool_call_id"),
                               None if name is None else string(name, f"{p}.tool_name"), p)
        return {"role": "tool", "tool_call_id": call_id, "content": content or ""}
    if role != "assistant":
        return {"role": role, "content": content or ""}
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if m.get("tool_calls") is not None:
        message["tool_calls"] = _tool_calls(m["tool_calls"], f"{p}.tool_calls", turn, calls)
    return message


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("messages: expected an array of messages.", param="messages")
    out: list[dict[str, Any]] = []
    calls, turn = Calls(result="tool message", call="tool call"), 0
    for i, m in enumerate(value):
        out.append(_message(m, f"messages[{i}]", turn, calls))
        turn += out[-1]["role"] == "assistant"
    return out


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("tools: expected an array of tools.", param="tools")
    tools = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type", "function") != "function":
            raise invalid(f"{p}: this mock serves function tools only (type, function).", param=p)
        tools.append(chat_tool(function.get("name"), function.get("description"), function.get("parameters"),
                               f"{p}.function"))
    return tools


def _num_predict(body: dict[str, Any]) -> int | None:
    options = body.get("options")
    if options is None:
        return None
    if not isinstance(options, dict):
        raise invalid("options: expected an object.", param="options")
    value = options.get("num_predict")
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value):
        value = int(value)  # Ollama reads a JSON number as float64 and truncates it for an integer option
    if not isinstance(value, int) or isinstance(value, bool):
        p = "options.num_predict"
        raise invalid(f"{p}: expected an integer, got {value!r}.", param=p)
    return value if value > 0 else None


def chat_request(raw: Any) -> ChatShaped:
    """A validated request in chat shape; `APIError` naming the offending field otherwise."""
    body = body_object(raw)
    stream = body.get("stream", True)
    if not isinstance(stream, bool):
        raise invalid("stream: expected a boolean.", param="stream")
    return ChatShaped(
        model=model_name(model_of(body)),
        messages=_messages(body.get("messages")),
        tools=_tools(body.get("tools")),
        max_tokens=_num_predict(body),
        stream=stream,
        paired=True,  # `pairing` matched the results, which may leave calls unanswered
    )


# --- the reply ------------------------------------------------------------------------------


def _created_at() -> str:
    ns = time.time_ns()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"


def _tool_calls_of(c: completions.Completion) -> list[dict[str, Any]]:
    """The reply's tool calls (`completions.object_calls`: a call a cut left unfinished is left out)."""
    return [{"id": call.id, "function": {"index": index, "name": call.name, "arguments": arguments}}
            for index, (call, arguments) in enumerate(completions.object_calls(c))]


def _assistant(c: completions.Completion, content: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    calls = _tool_calls_of(c)
    if calls:
        message["tool_calls"] = calls
    return message


class _Clock:
    """When the request arrived and when its reply was ready, for the duration fields."""

    def __init__(self) -> None:
        self.start = self.ready = time.monotonic_ns()

    def durations(self) -> dict[str, int]:
        now = time.monotonic_ns()
        # At least 1 ns each: clients divide eval_count by eval_duration for tokens per second.
        prompt, evaluation = max(1, self.ready - self.start), max(1, now - self.ready)
        return {"total_duration": prompt + evaluation, "load_duration": 0,
                "prompt_eval_duration": prompt, "eval_duration": evaluation}


def _final(c: completions.Completion, message: dict[str, Any], clock: _Clock) -> dict[str, Any]:
    return {
        "model": c.model, "created_at": _created_at(), "message": message, "done": True,
        "done_reason": "length" if c.finish_reason == "length" else "stop",
        **clock.durations(),
        "prompt_eval_count": c.prompt_tokens, "eval_count": c.completion_tokens,
    }


def body(c: completions.Completion, clock: _Clock) -> dict[str, Any]:
    return _final(c, _assistant(c, c.content or ""), clock)


def lines(c: completions.Completion, clock: _Clock) -> Iterator[tuple[bytes, int]]:
    """The NDJSON stream: a line per delta of text, one with every tool call, then the last."""
    def line(data: dict[str, Any]) -> bytes:
        return json.dumps(data, separators=(",", ":")).encode() + b"\n"

    # the text comes before the calls
    for piece, tokens in completions.weighed_deltas(c.content or "", c.chunk):
        yield line({"model": c.model, "created_at": _created_at(),
                    "message": {"role": "assistant", "content": piece}, "done": False}), tokens
    calls = _tool_calls_of(c)
    if calls:  # one line carries every call: it waits for all their arguments' tokens
        yield line({"model": c.model, "created_at": _created_at(),
                    "message": {"role": "assistant", "content": "", "tool_calls": calls},
                    "done": False}), completions.arguments_tokens(c)
    yield line(_final(c, {"role": "assistant", "content": ""}, clock)), False


# --- the endpoints --------------------------------------------------------------------------


def _only(request: Request, method: str) -> None:
    if request.method != method:
        raise APIError(405, f"{request.method} {request.url.path}: use {method}.", headers={"allow": method})


async def _chat(request: Request) -> Response:
    clock = _Clock()
    _only(request, "POST")
    config = config_of(request)
    raw = await read_raw(request, config, any_content_type=True)
    parsed = _parse(raw)
    req = chat_request(parsed)
    sent = parsed["model"]  # the reply names the model as the request did, tag and all, as Ollama's does
    if not req.messages:
        resolve(request, config, req.model)  # an unknown model is still a 404
        return json_response({"model": sent, "created_at": _created_at(),
                              "message": {"role": "assistant", "content": ""},
                              "done_reason": "unload" if _unloads(parsed.get("keep_alive")) else "load",
                              "done": True})
    attempts.fill_in(request, raw)
    turn = await scripted_turn(request, config, req, midstream_faults=True)
    if isinstance(turn, APIError):
        return error_response(turn)
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    if turn.cut is None:  # a reply a fault breaks is no answer: the same request again is the next attempt
        attempts.settle(request)
    clock.ready = time.monotonic_ns()
    completion = turn.completion._replace(model=sent)
    if not req.stream:
        return as_json(turn, body(completion, clock))
    return streamed(turn, lines(completion, clock), _stream_error, media_type="application/x-ndjson")


def _stream_error(_: int) -> bytes:
    """What Ollama sends when a stream fails after it started: a line holding the error."""
    return b'{"error":"The server had an error while streaming (injected fault)."}\n'


# Every number but a lone last one ends in a unit, so the pattern never backtracks without end.
_ZERO = re.compile(r"(?:0+(?:\.0*)?(?:ns|us|µs|ms|s|m|h))+|0+(?:\.0*)?")


def _unloads(keep_alive: Any) -> bool:
    """Whether `keep_alive` is zero (seconds as a number, or a Go duration string): with no
    messages, Ollama then unloads the model instead of loading it."""
    if isinstance(keep_alive, (int, float)) and not isinstance(keep_alive, bool):
        return keep_alive == 0
    return isinstance(keep_alive, str) and _ZERO.fullmatch(keep_alive) is not None


async def chat(request: Request) -> Response:
    try:
        return await _chat(request)
    except APIError as e:
        return error_response(e)
    except RecursionError:
        # A body nested nearly to the parser's limit parses, then overflows the stack deeper
        # down, where it is read or counted.
        return error_response(invalid("invalid JSON body: nested too deeply"))


def _details() -> dict[str, Any]:
    return {"parent_model": "", "format": "mockprovider", "family": "mockprovider",
            "families": ["mockprovider"], "parameter_size": "", "quantization_level": ""}


async def tags(request: Request) -> Response:
    try:
        config = config_of(request)
        authorize(request, config)
    except APIError as e:
        return error_response(e)
    models = [
        {"name": name + TAG, "model": name + TAG, "modified_at": EPOCH, "size": 0,
         "digest": hashlib.sha256(name.encode()).hexdigest(), "details": _details()}
        for name in config.scenarios
    ]
    return json_response({"models": models})


async def _show(request: Request) -> Response:
    _only(request, "POST")
    config = config_of(request)
    body = body_object(_parse(await read_raw(request, config, any_content_type=True)))
    model = body.get("model", body.get("name"))  # `name` is the field's older spelling
    if model is None:
        raise missing("model")
    name = model_name(string(model, "model"))
    script, _ = resolve(request, config, name)
    return json_response({
        "modelfile": f"# scripted by mockprovider\nFROM {name}\n",
        "parameters": "",
        "template": "",
        "details": _details(),
        "model_info": {"general.architecture": "mockprovider", "general.basename": name,
                       "general.description": scenarios.describe(script)},
        "capabilities": ["completion", "tools"],
        "modified_at": EPOCH,
    })


async def show(request: Request) -> Response:
    try:
        return await _show(request)
    except APIError as e:
        return error_response(e)


async def not_found(request: Request) -> Response:
    """Any other path under /api: a 404 in Ollama's shape, naming what is served."""
    return error_response(APIError(
        404, f"{request.method} {request.url.path}: not served here; this mock serves /api/chat, "
             "/api/tags and /api/show.",
    ))


# Every method reaches the endpoints, so a wrong one is refused in Ollama's shape too.
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [
    route
    for prefix in ("", "/o/{options}")
    for route in (
        Route(f"{prefix}/api/chat", chat, methods=_ANY),
        Route(f"{prefix}/api/tags", tags, methods=["GET"]),
        Route(f"{prefix}/api/show", show, methods=_ANY),
        Route(f"{prefix}/api/{{path:path}}", not_found, methods=_ANY),
    )
]
