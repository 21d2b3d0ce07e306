"""The mock's small shortcuts, each beside the plain code it skips (see `tricks`).

Most of these decide, with a test or two, that a step has nothing to do for an agent loop's usual
request and skip it; the plain side takes the step. The reply's headers are here too.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from itertools import repeat as repeat_
from types import SimpleNamespace
from typing import Any

import orjson
from starlette.requests import Request

from experiments.bench.tricks import Trick, drive, patched_batch, repeat
from mockprovider import Options, create_app
from mockprovider.bench_hooks import (
    attempt_of,
    chat,
    completions,
    faults,
    headers,
    memo,
    metrics,
    protocol,
    request_headers,
    scenarios,
    settings,
    steps,
    tool_choice,
    transcript,
    validation,
)
from mockprovider.bench_hooks import (
    body as reading_body,
)
from mockprovider.bench_hooks import (
    cycle as cycle_,
)

# --- the reply's headers ---------------------------------------------------------------------


def adding_with_comprehensions(scope: Any, send: Any, defaults: Options, rid: str, started: float) -> Any:
    """`headers.adding` written with comprehensions."""
    anthropic = headers.anthropic_path(scope["path"])

    async def send_with_headers(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            options = scope.get(headers.OPTIONS) or defaults
            limited = message["status"] == 429
            extra = (headers.anthropic_headers(options, rid, limited) if anthropic
                     else headers.openai_headers(options, rid, started, limited))
            given = list(message.get("headers", ()))
            names = {name.lower() for name, _ in given}
            retry = [(b"retry-after", b"1")] if limited and b"retry-after" not in names else []
            message["headers"] = given + [h for h in extra if h[0] not in names] + retry
        await send(message)

    return send_with_headers


def _without_clock(out: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in out if k != b"openai-processing-ms"]


def _without_clock_line(out: bytes) -> bytes:
    return re.sub(rb"openai-processing-ms: \d+\r\n", b"", out)


def header_tricks() -> list[Trick]:
    scope = {"path": "/v1/chat/completions"}
    defaults, rid, started = Options(), "req_bench", 0.0

    async def sink(message: Any) -> None:
        return None

    def reply_start(adding: Callable[..., Any]) -> list[tuple[bytes, bytes]]:
        message = {"type": "http.response.start", "status": 200,
                   "headers": [(b"content-length", b"512"), (b"content-type", b"application/json")]}
        drive(adding(scope, sink, defaults, rid, started)(message))
        return message["headers"]

    stated = repeat(lambda: headers.openai_headers(defaults, rid, started))
    limits = headers._openai_limits
    lane_scope = {headers.STARTED: started, headers.REQUEST_ID: rid}

    def lane_head() -> list[tuple[bytes, bytes]]:
        head = headers.json_head(lane_scope, defaults)  # as `ChatLane` sends it as ASGI messages
        head += ((b"content-length", b"512"), (b"content-type", b"application/json"))
        return head

    def built_each_time() -> list[tuple[bytes, bytes]]:
        head = headers.openai_headers(defaults, rid, started)
        head += ((b"content-length", b"512"), (b"content-type", b"application/json"))
        return head

    return [
        # `json_head` serves a reply sent as ASGI messages (uvicorn's own protocols, a middleware);
        # one handed to the cycle whole keeps its lines the same way (`json_lines`).
        Trick(name="the defaults' header block kept", where="headers.json_head", turn=1, uses=0,
              key=_without_clock,
              with_=repeat(lane_head), without=repeat(built_each_time)),
        Trick(name="plain loops adding the API's headers", where="headers.adding", turn=1, uses=0,
              key=_without_clock, with_=repeat(lambda: reply_start(headers.adding)),
              without=repeat(lambda: reply_start(adding_with_comprehensions))),
        Trick(name="rate-limit headers cached", where="headers._openai_limits", turn=1, key=_without_clock,
              with_=stated, without=patched_batch(stated, headers, "_openai_limits", limits.__wrapped__)),
    ]




# --- shortcuts in the request's path ---------------------------------------------------------


def _walk(body: Any) -> bool:
    """`check_depth`'s walk, without its bracket count: whether `body` nests past validation.MAX_DEPTH."""
    return validation._deeper_than(validation.MAX_DEPTH, [(body, 1)])


def _depth_trick(raw: bytes, body: Any) -> Trick:
    return Trick(name="depth walk skipped by a bracket count", where="validation.check_depth", turn=1,
                 with_=repeat(lambda: validation.check_depth(raw, body)),
                 without=repeat(lambda: None if not _walk(body) else "too deep"))


def _plain_content_type(value: bytes) -> str:
    return value.decode("latin-1").split(";")[0].strip().lower()


async def plain_scripted_reply(
    request: Request, script: Any, conversation: Any, tools: Any, options: Options, choice: Any,
) -> tuple[Any, Options]:
    """`steps.scripted_reply` with the tool-choice rule applied to every reply."""
    reply = script(conversation)
    if reply.latency_ms or reply.error is not None:
        raise RuntimeError("the bench's scenario answers at once, without an error")
    reply = tool_choice.constrain(reply, script=script, turn=conversation.turn, choice=choice, tools=tools,
                                  refuse_undeclared=options.refuse_undeclared)
    if reply.rate_tps is not None:
        options = replace(options, rate_tps=reply.rate_tps)
    if options.chunk and reply.chunk == 1:
        reply = replace(reply, chunk=options.chunk)
    if reply.usage is not None and options.usage != "recorded":
        reply = replace(reply, usage=None)
    return reply, options


def _constrain_skip(req: chat.ChatRequest, scope: dict[str, Any]) -> Trick:
    script = scenarios.SCENARIOS["runaway"]
    conversation = req.transcript.conversation(req.tools)
    request = Request(dict(scope))
    given = (request, script, conversation, req.tools, Options(), req.tool_choice)
    return Trick(
        name="tool-choice rule skipped for tools offered, auto", where="steps.scripted_reply", turn=1,
        with_=repeat(lambda: drive(steps.scripted_reply(*given))),
        without=repeat(lambda: drive(plain_scripted_reply(*given))),
    )


def plain_chat_request(body: dict[str, Any], messages: Any) -> chat.ChatRequest:
    """`chat.chat_request` (for a body it accepts) looking up every optional field."""
    model = body.get("model")
    if model is None or not isinstance(model, str) or not model:
        raise RuntimeError("the bench's body names its model")
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(map(isinstance, tools, repeat_(dict)))):
        raise RuntimeError("the bench's tools are objects")
    if tools:
        chat.check_tools(tools)
    choice = tool_choice.AUTO
    if "tool_choice" in body:
        choice = tool_choice.chat_choice(body["tool_choice"])
        tool_choice.check(choice, tools)
    stream = validation.flag(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RuntimeError("the bench's stream_options are an object")
    if body.get("temperature") is not None:
        validation.number_in(body, "temperature", 0, 2)
    settings.check(body, settings.CHAT)  # every setting's rule looked up, present or not
    form = body.get("response_format")
    if form is not None:
        raise RuntimeError("the bench's body has no response_format")
    n = body.get("n")
    if n is not None and n != 1:
        raise RuntimeError("the bench asks one choice")
    return chat.ChatRequest(
        model=model, transcript=messages, tools=tools, tool_choice=choice,
        max_tokens=chat._max_tokens(body), stream=stream,
        include_usage=bool(stream and options and options.get("include_usage")),
    )


def _optional_fields(body: dict[str, Any], req: chat.ChatRequest) -> Trick:
    """`chat_request` on a body without `stream` or `max_tokens`, the transcript read beforehand
    (on both sides: its own tricks are timed apart)."""
    return Trick(name="absent optional fields not looked up", where="chat.chat_request", turn=1,
                 with_=repeat(lambda: chat.chat_request(body, req.transcript)),
                 without=repeat(lambda: plain_chat_request(body, req.transcript)))


def _attempt_skip(scope: dict[str, Any]) -> Trick:
    """The client's attempt, read only when a fault or the log needs it (neither, in-process)."""
    options = Options()

    def attempt_read() -> Any:
        request = Request(dict(scope))
        attempt = attempt_of(request_headers.header(request, b"x-lab-attempt"),
                             request_headers.header(request, b"x-stainless-retry-count"))
        fault = options.fault_for(1, attempt)
        faults.log.info("model=%s turn=%d attempt=%d status=%s", "runaway", 1, attempt,
                        fault.kind if fault else "ok")
        return fault

    return Trick(name="attempt read only for a fault or the log", where="faults.delay_or_fault", turn=1,
                 with_=repeat(lambda: drive(faults.delay_or_fault(Request(dict(scope)), "runaway", 1,
                                                                  options))),
                 without=repeat(attempt_read))


def _os_bits(k: int) -> int:
    """`k` (at most 122) random bits from the OS, as uuid4 draws them (a system call each)."""
    return uuid.uuid4().int >> (128 - k)


def _ids(c: completions.Completion) -> Trick:
    """A reply's id and its request's id, drawn as the mock draws them (96 random bits from the
    process's generator) against the same bits from the OS, as uuid4 takes them."""
    fields = (c.model, c.prompt_tokens, c.cache, c.content, c.tool_calls, c.finish_reason,
              c.completion_tokens, c.reasoning, c.reasoning_tokens, c.chunk)
    both = repeat(lambda: (headers.start({})[0], completions._completion(*fields).id))
    from_os = patched_batch(both, completions, "getrandbits", _os_bits)
    from_os = patched_batch(from_os, headers, "getrandbits", _os_bits)
    return Trick(name="ids from getrandbits", where="completions._completion, headers.start", turn=1,
                 key=lambda ids: tuple(map(len, ids)), with_=both, without=from_os)


def _metric_series() -> Trick:
    """A request's count and time kept as plain numbers, read when scraped, against the
    prometheus_client `Counter` and `Histogram` children the mock kept before (found by labels
    once, then `inc` and `observe`, each taking its locks)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram

    kept = metrics.Metrics()
    registry = CollectorRegistry()
    route, scenario = "/v1/chat/completions", "runaway"
    labels = ("route", "status", "scenario")
    counter = Counter(metrics.REQUESTS, metrics.REQUESTS_HELP, labels, registry=registry)
    histogram = Histogram(metrics.SECONDS, metrics.SECONDS_HELP, ("route",), buckets=metrics.BUCKETS,
                          registry=registry)
    series: dict[tuple[str, int, str], tuple[Any, Any]] = {}

    def plain() -> bool:
        kept.requests.record(route, 200, scenario, 0.0003)
        return True

    def client() -> bool:
        found = series.get((route, 200, scenario))
        if found is None:
            found = (counter.labels(route, "200", scenario), histogram.labels(route))
            series[(route, 200, scenario)] = found
        found[0].inc()
        found[1].observe(0.0003)
        return True

    return Trick(name="request metrics kept as plain numbers", where="metrics.RequestSeries.record", turn=1,
                 with_=repeat(plain), without=repeat(client))


def _plain_config_of(request: Request) -> Any:
    """`steps.config_of` reading the app's state by attribute, as Starlette's docs show."""
    state = request.app.state
    tests = getattr(state, "tests", None)
    if tests and (config := tests.get(steps.test_id(request))) is not None:
        return config
    return state.config


def _state_dict(scope: dict[str, Any]) -> Trick:
    scope = {**scope, "app": create_app()}
    return Trick(name="app state read from its dict", where="steps.config_of", turn=1,
                 with_=repeat(lambda: steps.config_of(Request(dict(scope)))),
                 without=repeat(lambda: _plain_config_of(Request(dict(scope)))))


def _searched_with_in(raw: bytes, tools: Any) -> tuple[Any, Any]:
    """`memo.parse` of a short body and `transcript.tools_key`, their byte searches written with `in`."""
    parsed = (orjson.loads(raw), None) if memo._LONG not in raw.translate(memo._DIGITS) else memo.parse(raw)
    key = orjson.dumps(tools)
    nulls = transcript._NULLS
    if nulls[0] in key or nulls[1] in key or nulls[2] in key:
        key = repr(tools)
    return parsed, key


def _find_trick(raw: bytes, tools: Any) -> Trick:
    return Trick(name="bytes searched with find", where="memo.parse, transcript.tools_key", turn=1,
                 with_=repeat(lambda: (memo.parse(raw), transcript.tools_key(tools))),
                 without=repeat(lambda: _searched_with_in(raw, tools)))


USAGE = (
    '"usage":{{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{},'
    '"prompt_tokens_details":{{"cached_tokens":{},"audio_tokens":0}},'
    '"completion_tokens_details":{{"reasoning_tokens":{},"audio_tokens":0,'
    '"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}'
)
"""The `usage` member as a `str.format` template, as `chat.render` wrote it before."""


def _formatted_usage(c: completions.Completion) -> str:
    total = c.prompt_tokens + c.completion_tokens
    return USAGE.format(c.prompt_tokens, c.completion_tokens, total, c.cache.read, c.reasoning_tokens)


def _usage_trick(completion: completions.Completion) -> Trick:
    rendered = repeat(lambda: chat.render(completion))
    return Trick(name="usage written by an f-string", where="chat._usage", turn=1, with_=rendered,
                 without=patched_batch(rendered, chat, "_usage", _formatted_usage))


class _Connection:
    """What a `cycle.Cycle` reads of its connection: a transport that keeps what is written,
    the server's own headers (rendered by `Http11.default_head`), no flow control to wait on."""

    access_log = False
    default_head = protocol.Http11.default_head
    _defaults = protocol.Http11._defaults

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.transport = self
        self.flow = SimpleNamespace(write_paused=False)
        self.server_state = SimpleNamespace(default_headers=[(b"date", b"Thu, 03 Dec 2026 08:00:00 GMT"),
                                                             (b"server", b"uvicorn")])

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def on_response_complete(self) -> None:
        pass


def _whole_trick(completion: completions.Completion) -> Trick:
    """The chat lane's JSON reply handed to the cycle whole, its header lines rendered with the
    limits' lines kept, against its headers as ASGI pairs (held, as `BODY_FOLLOWS` holds them,
    then written with the body): the same bytes, one write, as `ChatLane` sends either."""
    connection, body, options = _Connection(), chat.render(completion), Options()
    scope = {"method": "POST", "http_version": "1.1", headers.REQUEST_ID: f"req_{7:024x}",
             headers.STARTED: time.perf_counter()}

    def whole() -> bytes:
        cycle = cycle_.Cycle(connection, scope, keep_alive=True, expect_100_continue=False)
        lines = headers.json_lines(scope, options) + headers.LENGTH_AND_TYPE % len(body)
        drive(cycle.send({"type": cycle_.WHOLE, "status": 200, "head": lines, "body": body}))
        return connection.written[-1]

    def started() -> bytes:
        cycle = cycle_.Cycle(connection, scope, keep_alive=True, expect_100_continue=False)
        listed = headers.json_head(scope, options)
        listed.append((b"content-length", b"%d" % len(body)))
        listed.append(headers.JSON_TYPE)
        drive(cycle.send({"type": "http.response.start", "status": 200, "headers": listed,
                          cycle_.BODY_FOLLOWS: True}))
        drive(cycle.send({"type": "http.response.body", "body": body}))
        return connection.written[-1]

    return Trick(name="a chat reply handed to the cycle whole", where="cycle.Cycle, chat.ChatLane", turn=1,
                 key=_without_clock_line, with_=repeat(whole), without=repeat(started))


def shortcut_tricks(raw: bytes, req: chat.ChatRequest, completion: completions.Completion,
                    scope: dict[str, Any]) -> list[Trick]:
    body = json.loads(raw)
    content_type = b"application/json"
    return [
        _depth_trick(raw, body),
        Trick(name="content type compared as bytes first", where="body._check_content_type", turn=1,
              with_=repeat(lambda: reading_body._check_content_type({b"content-type": content_type})),
              without=repeat(lambda: None if _plain_content_type(content_type) == "application/json" else 1)),
        _constrain_skip(req, scope),
        _optional_fields(body, req),
        _attempt_skip(scope),
        _ids(completion),
        _metric_series(),
        _whole_trick(completion),
        _state_dict(scope),
        _find_trick(raw, req.tools),
        _usage_trick(completion),
    ]
