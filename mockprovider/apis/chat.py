"""Chat Completions: `POST /v1/chat/completions`, the request an agent loop sends every turn.

The path reads top to bottom, each folder visited at most twice: `reading` reads the body and its
messages (`body.read_chat`), this module checks the other fields (`chat_request`), the shared
steps (`apis.steps`) pick the scenario and its options, `replies` waits or injects a fault,
`reading` finishes the count (`transcript.counted`), the scenario replies, `replies` completes
the reply, cut and counted, with its headers (`finished.finish`), and this module renders it:
one JSON body written from a template, or OpenAI's SSE chunks. `ChatLane` serves this route
ahead of Starlette's router.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from mockprovider.apis.chat_request import (  # noqa: F401  (the checks, read here by the benchmarks)
    ChatRequest,
    _max_tokens,
    chat_request,
    check_tools,
)
from mockprovider.apis.steps import api_error, client_gone, config_of, held, resolve
from mockprovider.cycle import BODY_FOLLOWS, WHOLE, in_task, takes_whole
from mockprovider.errors import APIError, ClientGone, json_bytes
from mockprovider.metrics import SCENARIO
from mockprovider.reading import transcript
from mockprovider.reading.body import read_chat
from mockprovider.replies import headers, midstream
from mockprovider.replies.caching import NO_CACHE, OPENAI_MIN_TOKENS
from mockprovider.replies.completions import Completion, weighed_deltas
from mockprovider.replies.faults import delay_or_fault, injected, wait_unless_gone
from mockprovider.replies.faults import log as faults_log
from mockprovider.replies.finished import finish, prompt_cache
from mockprovider.scripts.options import Options
from mockprovider.scripts.scenarios import ToolCall

# --- the reply's body and stream ----------------------------------------------------------------


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def body(c: Completion) -> dict[str, Any]:
    """The non-streaming `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": c.content, "refusal": None}
    if c.tool_calls:
        message["tool_calls"] = [_tool_call(t) for t in c.tool_calls]
    return {
        "id": c.id,
        "object": "chat.completion",
        "created": c.created,
        "model": c.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": c.finish_reason}],
        "usage": c.usage(),
        "system_fingerprint": "fp_mockprovider",
    }


_STR = encode_basestring
"""A string as JSON, as JSONResponse's encoder (ensure_ascii=False) writes it."""


def _usage(c: Completion) -> str:
    """The `usage` member's JSON. An f-string: `str.format` parses its template on every call and
    costs twice as much (results/bench.md, speed tricks: "usage written by an f-string")."""
    return (
        f'"usage":{{"prompt_tokens":{c.prompt_tokens},"completion_tokens":{c.completion_tokens},'
        f'"total_tokens":{c.prompt_tokens + c.completion_tokens},'
        f'"prompt_tokens_details":{{"cached_tokens":{c.cache.read},"audio_tokens":0}},'
        f'"completion_tokens_details":{{"reasoning_tokens":{c.reasoning_tokens},"audio_tokens":0,'
        f'"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}'
    )


MESSAGES_KEPT = 256
_MESSAGES: dict[int, tuple[tuple[ToolCall, ...], str]] = {}


def _message(content: str | None, tool_calls: tuple[ToolCall, ...]) -> str:
    """The reply's `message` member's JSON."""
    text = "null" if content is None else _STR(content)
    calls = ",".join([
        f'{{"id":{_STR(t.id)},"type":"function","function":{{"name":{_STR(t.name)},'
        f'"arguments":{_STR(t.arguments)}}}}}'
        for t in tool_calls
    ])
    message = f'{{"role":"assistant","content":{text},"refusal":null'
    return message + (f',"tool_calls":[{calls}]}}' if tool_calls else "}")


def render(c: Completion) -> bytes:
    """`body(c)` as JSON bytes, exactly as `JSONResponse(body(c))` renders it.

    Written from a template rather than by encoding `body(c)`: the reply's shape is fixed, and
    building and encoding the dicts costs several times as much (results/bench.md, speed tricks:
    "reply written from a template"). Every string goes through the encoder's own escaping, so
    the bytes are the same (tests/mockprovider/apis/test_chat_render.py).
    """
    # A scenario's reply is kept (`scenarios._asked`), so its calls are the same tuple reply after
    # reply: their message is written once (results/bench.md, speed tricks: "a reply's message
    # written once"). The tuple is held with its text, so its id is not reused while kept.
    kept = _MESSAGES.get(id(c.tool_calls)) if c.content is None else None
    if kept is not None and kept[0] is c.tool_calls:
        message = kept[1]
    else:
        message = _message(c.content, c.tool_calls)
        if c.content is None:
            if len(_MESSAGES) >= MESSAGES_KEPT:
                _MESSAGES.clear()
            _MESSAGES[id(c.tool_calls)] = (c.tool_calls, message)
    usage = _usage(c)
    text = (
        f'{{"id":{_STR(c.id)},"object":"chat.completion","created":{c.created},"model":{_STR(c.model)},'
        f'"choices":[{{"index":0,"message":{message},"logprobs":null,"finish_reason":{_STR(c.finish_reason)}}}],'
        f'{usage},"system_fingerprint":"fp_mockprovider"}}'
    )
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate echoed from the request: written escaped
        return json_bytes(body(c))


def chunks(c: Completion, *, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a stream, in order (without `[DONE]`)."""
    return (data for data, _ in weighed_chunks(c, include_usage=include_usage))


def weighed_chunks(c: Completion, *, include_usage: bool) -> Iterator[tuple[dict[str, Any], int]]:
    """`chunks(c)`, each with the tokens it carries (0 for the role, header and last chunks).

    Shape as OpenAI sends it: a role delta; then content deltas, and for tool calls a header
    delta per call (index, id, type, name, empty arguments) followed by its argument deltas
    (`c.chunk` tokens each), one call after another as OpenAI sends them; a
    final chunk with an empty delta and the finish reason; with `include_usage`, every chunk
    carries `usage: null` and one last chunk with no choices carries the usage.
    """

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {
            "id": c.id,
            "object": "chat.completion.chunk",
            "created": c.created,
            "model": c.model,
            "system_fingerprint": "fp_mockprovider",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            out["usage"] = None
        return out

    text_first = c.content is not None
    yield chunk({"role": "assistant", "content": "" if text_first else None, "refusal": None}), 0
    if text_first:
        for piece, tokens in weighed_deltas(c.content or "", c.chunk):
            yield chunk({"content": piece}), tokens
    for index, call in enumerate(c.tool_calls):
        header = {"index": index, "id": call.id, "type": "function",
                  "function": {"name": call.name, "arguments": ""}}
        yield chunk({"tool_calls": [header]}), 0
        for piece, tokens in weighed_deltas(call.arguments, c.chunk):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), tokens
    yield chunk({}, c.finish_reason), 0
    if include_usage:
        final = chunk({})
        final["choices"] = []
        final["usage"] = c.usage()
        yield final, 0


def sse(obj: dict[str, Any] | str) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


# --- the endpoint ------------------------------------------------------------------------------


async def _stream(completion: Completion, req: ChatRequest, options: Options) -> AsyncIterator[bytes]:
    delay = 1 / options.rate_tps if options.rate_tps else 0.0
    for chunk, tokens in weighed_chunks(completion, include_usage=req.include_usage):
        yield sse(chunk)
        if delay and tokens:
            await asyncio.sleep(delay * tokens)
    yield sse("[DONE]")


async def answer(request: Request, deployment: str | None = None) -> Response | bytes:
    """The chat endpoint's answer: a Response for streams and faults, else the JSON body's bytes,
    its headers left in the scope (`headers.JSON_HEAD`). `deployment` (Azure's routes) names the
    model instead of the body."""
    config = config_of(request)
    body, messages = await read_chat(request, config)
    req = chat_request(body, messages, deployment)
    script, options = resolve(request, config, req.model)
    turn = req.transcript.turn
    # Each step below is awaited only when it may wait: a coroutine fewer per step for the
    # request of an agent loop, which has nothing to wait for (results/bench.md, speed tricks:
    # "the chat lane's common case written in").
    # A request started without a task (`ChatLane`) takes one (`in_task`) before any step that
    # may need it: a fault's (a hang polls with anyio), a stream's (`ChatLane`).
    fault = None
    if options.faults or options.latency_ms or faults_log.isEnabledFor(logging.INFO):
        if options.faults or options.latency_ms:  # the log line alone waits for nothing
            await in_task()
        fault = await delay_or_fault(request, req.model, turn, options)
    cut = fault if fault is not None and midstream.applies(fault, req.stream) else None
    if fault is not None and cut is None:
        out = await injected(request, fault, options)
        return out.response() if isinstance(out, APIError) else Response(out, media_type="application/json")
    read = req.transcript
    if (read.remember is not None and not req.stream and cut is None
            and request.scope.get(LATER) is _LANE_RUNS_IT):
        read = remembered_later(read, request.scope)
    done = transcript.counted_already(read, req.tools)
    if done is None:
        done = await transcript.counted(read, req.tools)
    conversation, prompt_tokens = done
    reply = script(conversation)
    if reply.latency_ms:
        await wait_unless_gone(request, reply.latency_ms / 1000)
    reply, options = held(reply, script, turn, req.tools, options, req.tool_choice)
    cache = (NO_CACHE if prompt_tokens < OPENAI_MIN_TOKENS
             else await prompt_cache(req.transcript.messages, prompt_tokens, turn, options))
    completion = finish(reply, request.scope, req.model, prompt_tokens, req.max_tokens, cache, options)
    if cut is not None:
        if req.stream:
            return midstream.stream(_stream(completion, req, options), cut, lambda _: sse(STREAM_ERROR))
        return midstream.dropped_body(render(completion), cut)
    if req.stream:
        return StreamingResponse(
            _stream(completion, req, options),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    return render(completion)


LATER = "mockprovider.remember_later"
"""Where the transcript memory's step waits for `ChatLane` (or `chat_at_once`) to run it, once the
reply is written."""
_LANE_RUNS_IT = object()
"""`LATER` before the count: the lane will run what the count leaves there."""


def remembered_later(read: transcript.Transcript, scope: Scope) -> transcript.Transcript:
    """`read`, its messages remembered (`memo`) once `ChatLane` (or `chat_at_once`, which runs
    what it leaves at `LATER` the same way) has written the reply, not before:
    the client has its answer sooner by that step (results/bench.md, speed tricks: "transcript
    remembered after the reply"). Only for a plain JSON reply, which `ChatLane` writes and then
    finishes without a turn of the loop (on the mock's own server), so the next request of its
    conversation cannot come first; a stream's last bytes leave the loop a turn before the lane
    ends, so it remembers as it counts. Coming first would cost time, never a wrong answer."""
    remember = read.remember
    assert remember is not None

    def later(summary: transcript.Summary) -> None:
        scope[LATER] = lambda: remember(summary)

    # Not `_replace`, which costs several times as much: the fields written out, in their order.
    return transcript.Transcript(read.messages, read.known, later, *read[3:])


STREAM_ERROR = APIError(
    500, "The server had an error while processing your request (injected fault).", type="server_error"
).body()
"""What OpenAI sends when a chat stream fails after it started: an error object as a data line."""


async def chat_completions(request: Request) -> Response:
    """POST /v1/chat/completions behind the router (a base-URL options prefix, a root path):
    `ApiHeaders` adds the real API's headers."""
    out = await answer(request)
    return Response(out, media_type="application/json") if isinstance(out, bytes) else out


def serves(scope: Scope) -> bool:
    """Whether `scope` is a request `ChatLane` answers: `POST /v1/chat/completions`, no root path."""
    return (scope["type"] == "http" and scope["path"] == "/v1/chat/completions"
            and scope["method"] == "POST" and not scope.get("root_path"))


class ChatLane:
    """`POST /v1/chat/completions`, the request an agent loop sends every turn, answered ahead of
    Starlette: past its error middleware, the router, the exception middleware and `ApiHeaders`.

    Those layers cost what the mock's budget against a bare endpoint cannot spare (results/bench.md,
    speed tricks: "ChatLane"), so a plain JSON reply is sent here with its headers written in.
    What the endpoint raises is answered by the app's own handlers, as behind the router; an
    unexpected error before the reply started goes to `server_error`, then on to the server's log.
    """

    def __init__(self, defaults: Options, server_error: Callable[[Request, Exception], Awaitable[Response]],
                 record: Callable[[str, int, str, float], None] | None = None):
        self.defaults = defaults
        self.server_error = server_error
        self.record = record
        """Where each request's (route, status, scenario, seconds) goes once it ended (the app's
        metrics): recorded here, without a middleware's coroutine and `send` wrapper around the lane."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The processing clock starts here; the id is given with the reply's headers
        # (`finished.finish`), or below for any other reply.
        started = scope.setdefault(headers.STARTED, time.perf_counter())  # set already if it was held
        # The mock's own server with nothing between: the reply goes in one message, its head
        # rendered as lines where it is made (`finished.finish`).
        if whole := takes_whole(send):
            scope[headers.AS_LINES] = True
        status = [500]  # what a request that ends in an exception before its reply counts as
        scope[LATER] = _LANE_RUNS_IT
        try:
            try:
                out = await answer(Request(scope, receive, send))
            except (APIError, ClientGone) as exc:
                handler = api_error if isinstance(exc, APIError) else client_gone
                out = await handler(Request(scope, receive, send), exc)
            except Exception as exc:
                await in_task()
                scope.get(headers.REQUEST_ID) or headers.new_id(scope)
                response = await self.server_error(Request(scope, receive, send), exc)
                await response(scope, receive, _status(status, send))
                raise
            if isinstance(out, bytes):
                head = scope[headers.JSON_HEAD]
                status[0] = 200
                if whole:
                    await send({"type": WHOLE, "status": 200, "body": out,
                                "head": head + headers.LENGTH_AND_TYPE % len(out)})
                else:
                    head.append((b"content-length", b"%d" % len(out)))
                    head.append(headers.JSON_TYPE)
                    # Its body follows at once: one write for both (`cycle.BODY_FOLLOWS`).
                    await send({"type": "http.response.start", "status": 200, "headers": head,
                                BODY_FOLLOWS: True})
                    await send({"type": "http.response.body", "body": out})
            else:  # a stream (anyio's task group), or an error's reply
                await in_task()
                rid = scope.get(headers.REQUEST_ID) or headers.new_id(scope)
                send = headers.adding(scope, _status(status, send), self.defaults, rid, started)
                await self._respond(out, scope, receive, send)
        finally:
            if (later := scope.pop(LATER)) is not _LANE_RUNS_IT:
                later()
            if self.record is not None:
                self.record(ROUTE, status[0], scope.get(SCENARIO, ""), time.perf_counter() - started)

    async def _respond(self, out: Response, scope: Scope, receive: Receive, send: Send) -> None:
        """`out` sent; a crash once a stream started still goes to `server_error` (the server's log),
        as Starlette's error middleware does behind the router, and its 500 only if nothing was sent."""
        begun = False

        async def sending(message: Message) -> None:
            nonlocal begun
            begun = begun or message["type"] == "http.response.start"
            await send(message)

        try:
            await out(scope, receive, sending)
        except Exception as exc:
            response = await self.server_error(Request(scope, receive, send), exc)
            if not begun:
                await response(scope, receive, send)
            raise


ROUTE = "/v1/chat/completions"
"""The route the lane's requests are counted under, as the router's would be."""


def _status(status: list[int], send: Send) -> Send:
    """`send`, noting the reply's status in `status`."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        await send(message)

    return sending


ROUTES = [
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/o/{options}/v1/chat/completions", chat_completions, methods=["POST"]),
]
