"""The mock's small shortcuts, each beside the plain code it skips (see `tricks`).

Most of these decide, with a test or two, that a step has nothing to do for an agent loop's usual
request and skip it; the plain side takes the step. The reply's headers are here too.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from random import getrandbits
from typing import Any

from starlette.requests import Request

from experiments.bench.tricks import Trick, drive, patched_batch, repeat
from mockprovider import faults, headers, pipeline, scenarios, tool_choice, validation, wire
from mockprovider.faults import Options
from mockprovider.validation import MAX_DEPTH, ChatRequest

# --- the reply's headers ---------------------------------------------------------------------


def adding_with_comprehensions(scope: Any, send: Any, defaults: Options, rid: str, started: float) -> Any:
    """`headers.adding` written with comprehensions."""
    anthropic = scope["path"].endswith("/messages")

    async def send_with_headers(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            options = scope.get(headers.OPTIONS) or defaults
            extra = (headers.anthropic_headers(options, rid) if anthropic
                     else headers.openai_headers(options, rid, started))
            given = list(message.get("headers", ()))
            names = {name.lower() for name, _ in given}
            message["headers"] = given + [h for h in extra if h[0] not in names]
        await send(message)

    return send_with_headers


def _without_clock(out: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in out if k != b"openai-processing-ms"]


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
    return [
        Trick(name="plain loops adding the API's headers", where="headers.adding", turn=1, uses=0,
              key=_without_clock, with_=repeat(lambda: reply_start(headers.adding)),
              without=repeat(lambda: reply_start(adding_with_comprehensions))),
        Trick(name="rate-limit headers cached", where="headers._openai_limits", turn=1, key=_without_clock,
              with_=stated, without=patched_batch(stated, headers, "_openai_limits", limits.__wrapped__)),
    ]




# --- shortcuts in the request's path ---------------------------------------------------------


def _walk(body: Any) -> bool:
    """`check_depth`'s walk, without its bracket count: whether `body` nests past MAX_DEPTH."""
    return validation._deeper_than(MAX_DEPTH, [(body, 1)])


def _depth_trick(raw: bytes, body: Any) -> Trick:
    return Trick(name="depth walk skipped by a bracket count", where="validation.check_depth", turn=1,
                 with_=repeat(lambda: validation.check_depth(raw, body)),
                 without=repeat(lambda: None if not _walk(body) else "too deep"))


def _plain_content_type(value: bytes) -> str:
    return value.decode("latin-1").split(";")[0].strip().lower()


def _constrain_skip(req: ChatRequest) -> Trick:
    script = scenarios.SCENARIOS["runaway"]
    conversation = req.transcript.conversation(req.tools)
    reply = script(conversation)
    options, tools, choice = Options(), req.tools, req.tool_choice

    def constrained() -> Any:
        return tool_choice.constrain(reply, script=script, turn=conversation.turn, choice=choice, tools=tools,
                                     refuse_undeclared=options.refuse_undeclared)

    return Trick(
        name="tool-choice rule skipped for tools offered, auto", where="pipeline.scripted_reply", turn=1,
        with_=repeat(lambda: constrained() if not tools or choice.mode != "auto" or options.refuse_undeclared
                     else reply),
        without=repeat(constrained),
    )


def _optional_fields(body: dict[str, Any]) -> Trick:
    def looked_up_if_present() -> tuple[bool, int | None]:
        return (validation.flag(body, "stream") if "stream" in body else False,
                validation._max_tokens(body) if "max_tokens" in body or "max_completion_tokens" in body
                else None)

    return Trick(name="absent optional fields not looked up", where="validation.chat_request", turn=1,
                 with_=repeat(looked_up_if_present),
                 without=repeat(lambda: (validation.flag(body, "stream"), validation._max_tokens(body))))


def _attempt_skip(scope: dict[str, Any]) -> Trick:
    """The client's attempt, read only when a fault or the log needs it (neither, in-process)."""
    options = Options()

    def attempt_read() -> Any:
        request = Request(dict(scope))
        attempt = faults.attempt_of(pipeline.header(request, b"x-lab-attempt"),
                                    pipeline.header(request, b"x-stainless-retry-count"))
        fault = options.fault_for(1, attempt)
        pipeline.log.info("model=%s turn=%d attempt=%d status=%s", "runaway", 1, attempt,
                          fault.kind if fault else "ok")
        return fault

    def skipped() -> Any:
        Request(dict(scope))
        return attempt_read() if options.faults or pipeline.log.isEnabledFor(logging.INFO) else None

    return Trick(name="attempt read only for a fault or the log", where="pipeline.delay_or_fault", turn=1,
                 with_=repeat(skipped), without=repeat(attempt_read))


def _ids() -> Trick:
    """The reply's and the request's ids: 96 random bits from the process's generator, against
    uuid4's 128 from the OS (a system call each)."""
    return Trick(name="ids from getrandbits", where="wire._completion, headers.start", turn=1, uses=2,
                 key=len, with_=repeat(lambda: f"chatcmpl-{getrandbits(96):024x}"),
                 without=repeat(lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}"))


def shortcut_tricks(raw: bytes, req: ChatRequest, completion: wire.Completion,
                    scope: dict[str, Any]) -> list[Trick]:
    body = json.loads(raw)
    content_type = b"application/json"
    return [
        _depth_trick(raw, body),
        Trick(name="content type compared as bytes first", where="pipeline._check_content_type", turn=1,
              with_=repeat(lambda: pipeline._check_content_type({b"content-type": content_type})),
              without=repeat(lambda: None if _plain_content_type(content_type) == "application/json" else 1)),
        _constrain_skip(req),
        _optional_fields(body),
        _attempt_skip(scope),
        _ids(),
    ]
