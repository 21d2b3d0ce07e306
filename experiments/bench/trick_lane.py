"""The chat lane's common case written in, timed against the lane as it awaited every step.

The mock's `chat.answer` awaits a step only when it may wait (a fault or a latency, a count left
for a worker thread, a reply's own latency, a prompt cache to count) and reads a short body in
one pass (`body.read_chat`: its single message and the checks a plain body passes at a glance
written in). The plain side is the same request answered by the code it replaces: every step a
coroutine of its own, the body read by `_read_body` and every check called.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from experiments.bench.tricks import Batch, Trick, drive, patched_batch, repeat
from mockprovider.bench_hooks import (
    body,
    caching,
    chat,
    completions,
    faults,
    headers,
    memo,
    scenarios,
    steps,
    transcript,
)
from mockprovider.bench_hooks import validation as checks


async def _read_chat(request: Request, rules: Any) -> tuple[Any, Any]:
    """`body.read_chat` with every step called."""
    head = body._admitted(request, rules, False)
    raw = await body._read_body(request, head.get(b"content-length", b""), rules.max_body_bytes)
    body._kept(request, rules, raw)
    parsed, known = checks.parse_json(raw, memo.parse)
    checks.check_depth(raw, parsed, known)
    checks.refuse_lone_surrogates(raw, parsed, known)
    if type(parsed) is not dict:
        return parsed, body.missing("messages")
    try:
        return parsed, transcript.read(parsed.get("messages"), known)
    except body.APIError as error:
        return parsed, error


async def _finish(reply: Any, scope: Any, model: str, prompt_tokens: int, max_tokens: int | None,
                  messages: Any, turn: int, options: Any) -> Any:
    """The reply phase's end as one coroutine, as it was."""
    since = caching.openai_since(messages, prompt_tokens, turn, options)
    cache = caching.NO_CACHE if since is None else await _now(caching.openai_read, prompt_tokens, since)
    scope[headers.JSON_HEAD] = (headers.json_lines if scope.get(headers.AS_LINES) else headers.json_head)(
        scope, options)
    return completions.complete(reply, model=model, prompt_tokens=prompt_tokens, max_tokens=max_tokens,
                                cache=cache)


async def _now(fn: Any, *args: Any) -> Any:
    return fn(*args)


async def _answer(request: Request, deployment: str | None = None) -> Any:
    """`chat.answer` for a plain JSON reply, awaiting every step."""
    config = steps.config_of(request)
    parsed, messages = await _read_chat(request, config)
    req = chat.chat_request(parsed, messages, deployment)
    script, options = steps.resolve(request, config, req.model)
    turn = req.transcript.turn
    if await faults.delay_or_fault(request, req.model, turn, options) is not None or req.stream:
        raise RuntimeError("the plain side answers a plain JSON reply only")
    conversation, prompt_tokens = await transcript.counted(req.transcript, req.tools)
    reply, options = await steps.scripted_reply(request, script, conversation, req.tools, options,
                                                req.tool_choice)
    completion = await _finish(reply, request.scope, req.model, prompt_tokens, req.max_tokens,
                               req.transcript.messages, turn, options)
    return chat.render(completion)


def common_case_trick(lane: Batch, key: Any) -> Trick:
    """`lane`: the turn-1 request through the chat lane (the `ChatLane` trick's own side)."""
    return Trick(name="the chat lane's common case written in", where="chat.answer, body.read_chat", turn=1,
                 key=key, with_=lane, without=patched_batch(lane, chat, "answer", _answer))


class NeverKept(dict):
    """A cache that keeps nothing: every lookup misses."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _without_ids(out: bytes) -> dict[str, Any]:
    reply = json.loads(out)
    return {k: v for k, v in reply.items() if k not in ("id", "created")}


def kept_message_trick(req: Any) -> Trick:
    """A turn-1 reply completed and rendered, its calls' tokens and message JSON kept, against
    both worked out for every reply."""
    reply = scenarios.SCENARIOS["runaway"](req.transcript.conversation(req.tools))
    prompt_tokens = drive(transcript.prompt_tokens(req.transcript, req.tools))

    def answered() -> bytes:
        return chat.render(completions.complete(reply, model=req.model, prompt_tokens=prompt_tokens,
                                                max_tokens=None))

    kept = repeat(answered)
    never = patched_batch(patched_batch(kept, chat, "_MESSAGES", NeverKept()), completions, "_CALLS_COUNTED",
                          NeverKept())
    return Trick(name="a reply's message written once", where="chat.render, completions.complete", turn=1,
                 key=_without_ids, with_=kept, without=never)
