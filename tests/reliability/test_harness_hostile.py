"""Hostile input to the harness: a provider that answers garbage.

A tiny fake provider (`httpx.MockTransport` behind `ModelClient(transport=...)`) scripts each
reply by turn. Every case must end in a clear status with a message: a broken body is retried
(bounded) and then `failed`; malformed arguments and unknown tools go back to the model as
tool errors under the error policy; a reused call id neither loses a call nor borrows another
call's approval or result. In every case the FileStore copy of the run loads and equals it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import FULL

from harness import (
    FileStore,
    Limits,
    MemoryTrace,
    ModelClient,
    OpenAIChat,
    Policy,
    RunState,
    approve,
    new_run,
    run,
)
from harness.chapter import SYSTEM, chapter_tools, make_sandbox
from harness.codec import to_json
from harness.state import Approval

pytestmark = pytest.mark.slow

RETRIES = 2
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
TOOLS = "list_files, read_file, delete_file, scan_archive"
Script = Callable[[int, int], httpx.Response]
"""(turn, attempt) -> the provider's HTTP response."""


def reply(content: Any = None, calls: list[Any] | None = None, *, usage: Any = USAGE, **extra: Any) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else "stop"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
        **extra,
    }


def call(call_id: Any, name: Any, arguments: Any = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


Body = Callable[[], httpx.Response]
"""A fresh response per request (a response object is read once)."""


def ok(body: Any) -> Body:
    return lambda: httpx.Response(200, json=body)


def raw(content: bytes, content_type: str = "application/json") -> Body:
    return lambda: httpx.Response(200, content=content, headers={"content-type": content_type})


def then_answer(first: Body, *, answer: str = "done") -> Script:
    """Turn 0 gets `first` (every attempt); later turns a plain text answer."""
    return lambda turn, attempt: first() if turn == 0 else ok(reply(answer))()


@dataclass(kw_only=True)
class Outcome:
    state: RunState | None
    crash: str | None
    requests: list[tuple[int, int]] = field(default_factory=list)
    sandbox: Path | None = None
    sizes: list[int] = field(default_factory=list)
    """Bytes of each request body the harness sent."""
    saves: int = 0

    def tool_messages(self) -> list[dict]:
        assert self.state is not None
        return [m for m in self.state.messages if m["role"] == "tool"]


class CountingStore(FileStore):
    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.saves = 0

    def save(self, state: RunState) -> None:
        super().save(state)
        self.saves += 1


def drive(script: Script, directory: Path, *, state: RunState | None = None,
          client: dict[str, Any] | None = None, **options: Any) -> Outcome:
    """Run the harness against the scripted provider; the run must save a loadable copy of itself."""
    requests: list[tuple[int, int]] = []
    sizes: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        attempt = int(request.headers["x-lab-attempt"])
        requests.append((turn, attempt))
        sizes.append(len(request.content))
        return script(turn, attempt)

    store = CountingStore(directory / "runs")
    sandbox = directory / "sandbox"
    if not sandbox.is_dir():
        make_sandbox(sandbox)
    limits = options.pop("limits", Limits(max_turns=6))
    state = state or new_run("Which file mentions a timeout?", system=SYSTEM, run_id="hostile")

    async def main() -> RunState:
        async with ModelClient(
            "http://fake.test/v1",
            transport=httpx.MockTransport(handler),
            max_retries=RETRIES,
            backoff_s=0,
            max_wait_s=0,
            **(client or {}),
        ) as model_client:
            model = OpenAIChat("fake", client=model_client)
            return await run(state, model=model, tools=chapter_tools(sandbox), limits=limits,
                             policy=Policy(**options), store=store, trace=MemoryTrace())

    try:
        done = asyncio.run(main())
    except Exception as e:  # noqa: BLE001 - an escaping exception is exactly what we are looking for
        return Outcome(state=None, crash=f"{type(e).__name__}: {e}", requests=requests, sandbox=sandbox,
                       sizes=sizes, saves=store.saves)
    assert to_json(store.load(done.run_id)) == to_json(done), "the saved run differs from the run"
    return Outcome(state=done, crash=None, requests=requests, sandbox=sandbox, sizes=sizes, saves=store.saves)


# --- broken bodies: retried, then failed ------------------------------------------------------

BROKEN = {
    "non-JSON body": raw(b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    "truncated JSON": raw(b'{"id": "chatcmpl-x", "choices": [{"index": 0, "mess'),
    "empty body": raw(b""),
    "JSON array": ok([reply("hi")]),
    "missing choices": ok({"id": "x", "usage": USAGE}),
    "empty choices": ok({**reply("hi"), "choices": []}),
    "choices not a list": ok({**reply("hi"), "choices": "hi"}),
    "message is null": ok(
        {**reply("hi"), "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}
    ),
    "missing usage": ok({k: v for k, v in reply("hi").items() if k != "usage"}),
    "usage not numbers": ok(reply("hi", usage={"prompt_tokens": "many", "completion_tokens": 1})),
    "tool_calls not a list": ok(
        {
            **reply("hi"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "tool_calls": "list_files"},
                }
            ],
        }
    ),
    "NaN and Infinity in usage": raw(
        b'{"choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":NaN,"completion_tokens":Infinity}}'
    ),
    "tool call without function": ok(reply(None, [{"id": "c1", "type": "function"}])),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_response_body_is_retried_then_fails_with_the_reason(name, tmp_path, ledger):
    out = drive(then_answer(BROKEN[name]), tmp_path)
    problems = []
    if out.crash:
        problems.append(f"crashed: {out.crash}")
    else:
        s = out.state
        assert s is not None
        if s.status != "failed" or not s.error or "malformed response body" not in s.error:
            problems.append(f"status {s.status}, error {s.error!r}")
        if s.turns != 0 or s.cost_usd != 0:
            problems.append(f"billed {s.turns} turn(s) for garbage")
    if out.requests != [(0, a) for a in range(RETRIES + 1)]:
        problems.append(f"requests {out.requests}, expected {RETRIES + 1} attempts of turn 0")
    ledger.record(
        "harness: broken provider body (retried, then failed)",
        name,
        survived=int(not problems),
        lost=len(problems),
        detail="; ".join(problems) or (out.state.error or "")[:160],
    )
    assert not problems


def test_a_body_broken_once_is_retried_and_the_run_completes(tmp_path, ledger):
    def script(turn: int, attempt: int) -> httpx.Response:
        if turn == 0 and attempt == 0:
            return BROKEN["truncated JSON"]()
        return ok(reply("done") if turn else reply(None, [call("c1", "list_files")]))()

    out = drive(script, tmp_path)
    assert out.crash is None and out.state is not None
    assert (out.state.status, out.state.turns, out.state.answer) == ("completed", 2, "done")
    assert out.requests == [(0, 0), (0, 1), (1, 0)]
    ledger.record(
        "harness: broken provider body (retried, then failed)",
        "broken once, then fine",
        survived=1,
        detail="retried once; completed in 2 turns",
    )


# --- malformed calls: fed back to the model as tool errors ------------------------------------

FED_BACK = {
    "arguments not JSON": (call("c1", "read_file", '{"path": errors.log'), "are not a JSON object"),
    "arguments a JSON string": (call("c1", "read_file", '"errors.log"'), "are not a JSON object"),
    "arguments JSON null": (call("c1", "read_file", "null"), "are not a JSON object"),
    # Wrong wire types: fed back as a tool error, or refused as a malformed body — never a crash.
    "arguments an object, not a string": (call("c1", "read_file", {"path": "errors.log"}), "JSON"),
    "unknown tool": (call("c1", "rm_rf", '{"path": "/"}'), f"unknown tool 'rm_rf'; known: {TOOLS}"),
    "tool name null": (call("c1", None, "{}"), "unknown tool None"),
    "tool name a number": (call("c1", 7, "{}"), "unknown tool 7"),
}

WIRE_TYPES = {"arguments an object, not a string", "tool name null", "tool name a number"}


@pytest.mark.parametrize("policy", ["descriptive", "generic", "fatal"])
@pytest.mark.parametrize("name", list(FED_BACK))
def test_malformed_calls_go_back_to_the_model_as_tool_errors(name, policy, tmp_path, ledger):
    bad, words = FED_BACK[name]
    out = drive(then_answer(ok(reply(None, [bad]))), tmp_path, errors=policy)
    problems = []
    if out.crash:
        problems.append(f"crashed: {out.crash}")
    elif (
        name in WIRE_TYPES and out.state is not None and "malformed response body" in (out.state.error or "")
    ):
        pass  # refused as a malformed reply, retried, then failed: also a clear status
    else:
        s = out.state
        assert s is not None
        if policy == "fatal":
            if s.status != "failed" or words not in (s.error or ""):
                problems.append(f"status {s.status}, error {s.error!r}")
        else:
            expected = "Error: the tool failed." if policy == "generic" else words
            tool = out.tool_messages()
            if s.status != "completed" or len(tool) != 1 or expected not in tool[0]["content"]:
                problems.append(f"status {s.status}, tool messages {[m['content'] for m in tool]}")
            if s.tool_runs:
                problems.append(f"ran {s.tool_runs}")
    ledger.record(
        "harness: malformed tool call (fed back under the error policy)",
        f"{name}, {policy}",
        survived=int(not problems),
        lost=len(problems),
        detail="; ".join(problems),
    )
    assert not problems


# --- reused call ids -------------------------------------------------------------------------


def _refused(state: RunState, call_id: str) -> bool:
    """The run stopped `failed` naming the reused id (a provider that reuses ids is broken)."""
    return (
        state.status == "failed" and repr(call_id) in (state.error or "") and "reuse" in (state.error or "")
    )


def test_a_call_id_used_twice_in_one_reply_loses_neither_call(tmp_path, ledger):
    calls = [
        call("c1", "read_file", '{"path": "errors.log"}'),
        call("c1", "read_file", '{"path": "notes.txt"}'),
    ]
    out = drive(then_answer(ok(reply(None, calls))), tmp_path)
    assert out.crash is None and out.state is not None
    s = out.state
    # Either both calls are answered (one tool message each), or the reply is refused clearly.
    answered = len(out.tool_messages()) == 2 and len(s.tool_runs) <= 2
    refused = _refused(s, "c1")
    ledger.record(
        "harness: reused tool call id",
        "same id twice in one reply",
        survived=int(answered or refused),
        lost=0 if answered or refused else 1,
        detail=f"status {s.status}; {len(out.tool_messages())} tool message(s) for 2 calls; "
        f"runs {[r.args for r in s.tool_runs]}",
    )
    assert answered or refused, (
        f"the second call vanished: status {s.status}, tool messages "
        f"{[m['content'][:40] for m in out.tool_messages()]}, runs {[r.args for r in s.tool_runs]}"
    )


def test_a_call_id_reused_in_a_later_turn_does_not_inherit_its_approval(tmp_path, ledger):
    def script(turn: int, attempt: int) -> httpx.Response:
        if turn == 0:
            return ok(reply(None, [call("c1", "delete_file", '{"path": "access.log"}')]))()
        if turn == 1:  # a different delete under the same id
            return ok(reply(None, [call("c1", "delete_file", '{"path": "errors.log"}')]))()
        return ok(reply("done"))()

    first = drive(script, tmp_path)
    assert first.state is not None and isinstance(first.state.interruption, Approval)
    approve(first.state)  # the person approves deleting access.log, and only that
    out = drive(script, tmp_path, state=first.state)
    assert out.crash is None and out.state is not None and out.sandbox is not None
    s = out.state
    # Either the new delete stops for its own approval, or the reply is refused clearly.
    asked = isinstance(s.interruption, Approval) and s.interruption.args == {"path": "errors.log"}
    kept = (out.sandbox / "errors.log").exists()
    ok_ = kept and (asked or _refused(s, "c1"))
    ledger.record(
        "harness: reused tool call id",
        "same id for a second, unapproved delete",
        survived=int(ok_),
        lost=int(not kept),
        detail=f"status {s.status}; errors.log {'kept' if kept else 'DELETED without approval'}",
    )
    assert ok_, f"the unapproved delete ran: status {s.status}, errors.log exists: {kept}"


def test_a_call_id_reused_in_a_later_turn_does_not_get_another_calls_result(tmp_path, ledger):
    def script(turn: int, attempt: int) -> httpx.Response:
        if turn == 0:
            return ok(reply(None, [call("c1", "list_files")]))()
        if turn == 1:
            return ok(reply(None, [call("c1", "read_file", '{"path": "errors.log"}')]))()
        if turn == 2:  # identical to turn 1's call: dedupe answers it from c1's result
            return ok(reply(None, [call("c2", "read_file", '{"path": "errors.log"}')]))()
        return ok(reply("done"))()

    out = drive(script, tmp_path, dedupe="read-only")
    assert out.crash is None and out.state is not None
    last = out.tool_messages()[-1]
    right = (last["tool_call_id"] == "c2" and "worker 7 timed out" in last["content"]) or _refused(
        out.state, "c1"
    )
    ledger.record(
        "harness: reused tool call id",
        "same id, then a deduped call reads the cache",
        survived=int(right),
        lost=int(not right),
        detail=f"status {out.state.status}" if right else f"c2 was answered with: {last['content'][:60]!r}",
    )
    assert right, f"the deduped read_file got another call's result: {last['content'][:80]!r}"


# --- any reply at all: the run stops with a status, the state loads ----------------------------

STATUSES = {"completed", "failed", "max_turns_exceeded", "budget_exceeded", "interrupted"}
SHORT = st.text(max_size=10)
# Finite floats only: the fake provider encodes with httpx, which refuses NaN (BROKEN sends it raw).
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | SHORT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SHORT, inner, max_size=3),
    max_leaves=8,
)
CALLS = st.lists(
    st.builds(
        call,
        st.sampled_from(["c1", "c2"]) | JSON,
        st.sampled_from(["list_files", "read_file", "delete_file", "nope"]) | JSON,
        st.sampled_from(["{}", '{"path":"notes.txt"}', "{", "[]"]) | JSON,
    )
    | JSON,
    max_size=3,
)
REPLIES = (
    st.builds(
        lambda c, calls, u: reply(c, calls, usage=u), st.none() | SHORT | JSON, CALLS, st.just(USAGE) | JSON
    ).map(ok)
    | JSON.map(ok)
    | st.binary(max_size=60).map(raw)
)


def test_any_provider_reply_ends_in_a_status_and_a_loadable_state(tmp_path, ledger):
    seen = {"tried": 0, "crashed": 0}
    crashes: list[str] = []

    @settings(
        max_examples=1_000 if FULL else 100,
        deadline=None,
        database=None,
        derandomize=not FULL,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(first=REPLIES, later=REPLIES)
    def one(first: Body, later: Body) -> None:
        seen["tried"] += 1
        directory = tmp_path / str(seen["tried"])
        out = drive(lambda turn, attempt: first() if turn == 0 else later(), directory)
        if out.crash is not None:
            seen["crashed"] += 1
            crashes.append(out.crash)
        assert out.crash is None, out.crash
        assert out.state is not None and out.state.status in STATUSES
        if out.state.status == "failed":
            assert out.state.error

    try:
        one()
    finally:
        ledger.record(
            "harness: fuzzed provider replies (hypothesis)",
            f"{seen['tried']} runs",
            tried=seen["tried"],
            survived=seen["tried"] - seen["crashed"],
            lost=seen["crashed"],
            detail="; ".join(sorted(set(crashes)))[:300],
        )
