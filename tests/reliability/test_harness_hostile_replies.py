"""A provider attacking the harness with numbers, sizes, time and terminal escapes.

Same scripted fake provider as `test_harness_hostile` (an `httpx.MockTransport` behind
`ModelClient`). Each case must end in a clear status with the reason and a loadable state:
usage that is not a sane whole number is a malformed reply (retried, then `failed`), never a
negative cost or an overflow; thousands of calls or megabytes of arguments in one reply are
answered with errors the model reads, in one save, and never echoed back; a body trickled
byte by byte is cut at the attempt's deadline; and whatever the provider says reaches the
terminal with its control characters escaped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import httpx
import pytest
from test_harness_hostile import RETRIES, USAGE, call, drive, ok, reply, then_answer

from harness import Limits, Policy, new_run
from harness.cli import Settings
from harness.cli import main as harness_main
from harness.store.sqlite import SQLiteStore

pytestmark = pytest.mark.slow

NUMBERS = "harness: hostile provider numbers (usage)"
SIZES = "harness: oversized replies (tool calls, arguments)"

BAD_USAGE = {
    "negative prompt_tokens": {"prompt_tokens": -100000, "completion_tokens": 1},
    "negative completion_tokens": {"prompt_tokens": 5, "completion_tokens": -1},
    "400-digit integer": {"prompt_tokens": 10**400, "completion_tokens": 1},
    "a billion tokens": {"prompt_tokens": 10**9, "completion_tokens": 1},
    "fractional tokens": {"prompt_tokens": 10.5, "completion_tokens": 1},
}


@pytest.mark.parametrize("name", list(BAD_USAGE))
def test_usage_that_is_not_a_sane_count_is_malformed_never_a_negative_cost(name, tmp_path, ledger):
    # A $0.001 budget: negative usage used to make cost negative, so it never stopped the run.
    bad = ok(reply(None, [call("c1", "list_files")], usage=BAD_USAGE[name]))
    out = drive(lambda turn, attempt: bad(), tmp_path, limits=Limits(max_turns=40, max_budget_usd=0.001))
    s = out.state
    problems = [f"crashed: {out.crash}"] if out.crash else []
    if s is not None:
        if s.status != "failed" or "usage." not in (s.error or ""):
            problems.append(f"status {s.status}, error {s.error!r}")
        if s.cost_usd != 0 or s.turns != 0:
            problems.append(f"counted {s.turns} turn(s), cost {s.cost_usd}")
    if len(out.requests) != RETRIES + 1:
        problems.append(f"{len(out.requests)} requests")
    ledger.record(NUMBERS, name, survived=int(not problems), lost=len(problems), detail="; ".join(problems))
    assert not problems


def test_two_thousand_calls_in_one_reply_are_capped_and_answered_in_one_save(tmp_path, ledger):
    calls = [call(f"c{i}", "list_files") for i in range(2000)]
    out = drive(then_answer(ok(reply(None, calls))), tmp_path, max_tool_calls=8)
    s = out.state
    assert out.crash is None and s is not None, out.crash
    answers = [m for m in s.messages if m["role"] == "tool"]
    refused = [m for m in answers if "at most 8 tool calls" in m["content"]]
    # 8 calls run (a save each), the other 1,992 are answered together with the reply: O(cap), not O(n).
    ok_ = (s.status == "completed" and len(answers) == 2000 and len(refused) == 1992
           and len(s.tool_runs) == 8 and out.saves <= 8 + 3)
    ledger.record(SIZES, "2,000 tool calls in one reply (cap 8)", survived=int(ok_), lost=int(not ok_),
                  detail=f"{out.saves} saves, {len(s.tool_runs)} runs, {len(refused)} refused")
    assert ok_, (s.status, len(answers), len(refused), len(s.tool_runs), out.saves)


def test_the_default_cap_is_64_calls(tmp_path, ledger):
    out = drive(then_answer(ok(reply(None, [call(f"c{i}", "list_files") for i in range(100)]))), tmp_path)
    assert out.state is not None and len(out.state.tool_runs) == Policy().max_tool_calls == 64
    assert out.saves <= 64 + 3
    ledger.record(SIZES, "100 tool calls in one reply (default cap 64)", survived=1)


def test_twenty_megabyte_arguments_are_refused_and_never_echoed(tmp_path, ledger):
    huge = json.dumps({"path": "x" * 20_000_000})
    out = drive(then_answer(ok(reply(None, [call("c1", "read_file", huge)]))), tmp_path)
    s = out.state
    assert out.crash is None and s is not None, out.crash
    (answer,) = [m for m in s.messages if m["role"] == "tool"]
    saved_args = s.messages[2]["tool_calls"][0]["function"]["arguments"]
    ok_ = (s.status == "completed" and "over the 1,000,000-byte limit" in answer["content"]
           and len(saved_args) < 100 and max(out.sizes[1:]) < 100_000 and not s.tool_runs)
    ledger.record(SIZES, "20 MB arguments", survived=int(ok_), lost=int(not ok_),
                  detail=f"next request {max(out.sizes[1:]):,} bytes; saved arguments {saved_args[:60]}")
    assert ok_, (s.status, answer["content"][:200], saved_args[:80], out.sizes)


def test_an_argument_cap_is_configurable(tmp_path, ledger):
    out = drive(then_answer(ok(reply(None, [call("c1", "read_file", '{"path": "errors.log"}')]))), tmp_path,
                max_argument_bytes=10)
    assert out.state is not None
    (answer,) = [m for m in out.state.messages if m["role"] == "tool"]
    assert "over the 10-byte limit" in answer["content"] and not out.state.tool_runs
    ledger.record(SIZES, "arguments over a 10-byte cap", survived=1)


class _Trickle(httpx.AsyncByteStream):
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self):
        for i in range(len(self.body)):
            await asyncio.sleep(0.02)  # each read is quick: a per-read timeout never fires
            yield self.body[i : i + 1]


def test_a_body_trickled_byte_by_byte_is_cut_at_the_attempt_deadline(tmp_path, ledger):
    body = json.dumps(reply("done")).encode()
    slow = lambda turn, attempt: httpx.Response(200, stream=_Trickle(body))  # noqa: E731
    out = drive(slow, tmp_path, client={"deadline_s": 0.2})
    s = out.state
    ok_ = out.crash is None and s is not None and s.status == "failed" and "deadline" in (s.error or "")
    ledger.record("harness: trickled provider body (deadline per attempt)", "1 byte / 20 ms",
                  survived=int(ok_), lost=int(not ok_), detail=(s.error if s else out.crash) or "")
    assert ok_, out


# --- terminal escapes -----------------------------------------------------------------------

ESC = "\x1b"
HOSTILE_ID = 'c1\x1b[2K\r   stopped: interrupted / approval -> delete_file({"path": "notes.txt"})\x1b[8m'


def _cli_output(script, tmp_path: Path, capsys, *argv: str) -> tuple[str, str]:
    state = new_run("task", run_id="hostile", meta={"settings": dataclasses.asdict(Settings())})
    drive(script, tmp_path, state=state)
    capsys.readouterr()
    harness_main(["--state-dir", str(tmp_path / "runs"), *argv])
    out = capsys.readouterr()
    return out.out, out.err


TERMINAL = {
    "ANSI in a call id and tool name": (
        then_answer(ok(reply(None, [call(HOSTILE_ID, "delete_file", '{"path": "private.key"}')]))),
        ("show", "hostile", "--messages"), "private.key"),
    "ANSI in the answer": (then_answer(ok(reply("fine\x1b]0;pwned\x07\x1b[1A"))),
                           ("show", "hostile", "--messages"), "fine"),
    "ANSI in an error": (lambda t, a: httpx.Response(400, json={"error": {"message": "no\x1b[31m\x9b2J"}}),
                         ("show", "hostile"), "error: no"),
    "ANSI in an unknown call id (approve)": (
        then_answer(ok(reply(None, [call("c1", "delete_file", '{"path": "notes.txt"}')]))),
        ("approve", "hostile", "zz\x1b[2J", "--no-resume"), "zz"),
}


@pytest.mark.parametrize("name", list(TERMINAL))
def test_provider_strings_reach_the_terminal_with_control_characters_escaped(name, tmp_path, capsys, ledger):
    script, argv, visible = TERMINAL[name]
    out, err = _cli_output(script, tmp_path, capsys, *argv)
    printed = out + err
    raw = [c for c in printed if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
    ok_ = not raw and visible in printed and "\\x1b" in printed
    ledger.record("harness: terminal escapes in provider strings (CLI output)", name, survived=int(ok_),
                  lost=int(not ok_), detail=f"raw control characters: {sorted(set(map(repr, raw)))}")
    assert ok_, printed


def test_usage_integer_that_overflows_float_leaves_a_loadable_state(tmp_path):
    # The old failure: OverflowError while pricing, a traceback and no state file at all.
    out = drive(then_answer(ok(reply("x", usage={**USAGE, "prompt_tokens": 10**400}))), tmp_path)
    assert out.crash is None
    assert SQLiteStore.in_folder(tmp_path / "runs").load("hostile").run_id == "hostile"
