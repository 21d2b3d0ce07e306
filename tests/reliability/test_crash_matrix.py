"""Crash matrix: SIGKILL a real harness process at every boundary of a run, resume in another.

The boundaries are not guessed: one uninterrupted run with a recording checkpoint lists them
("before_save", "mid_save", "after_model_reply", "after_intent", "after_tool_result", in the
order this run passes them), then for each index a fresh process runs `experiments.reliability.crash`
with the prefix up to that index, so it SIGKILLs itself exactly there. New processes then
bring the run home the way a person would: `resume` (or `run` again when nothing was saved
yet), and at an approval, the person's decision — an in-doubt delete is approved if
access.log is still there and rejected ("already deleted") if it is gone.

Each case checks, against an uninterrupted run with the same decisions:
- no lost turn: the final transcript, turns, tokens and cost are identical;
- no model call repeated for a turn already saved: the mock's own request log, per turn index;
- no write twice: `tool_start` of delete_file in the run's JSONL trace (every process appends
  to it), and the in-doubt path asks instead of writing;
- the saved run loads after every kill.

Every case runs against SQLite and against a real PostgreSQL (`store_for`), at each durability
(`each_durability`: what a commit survives must not change what a killed process loses).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from reliability_support import FULL, ROOT, RequestLog

from harness import RunState, open_store
from harness.cli import main as harness_main
from harness.state import Approval
from harness.trace import read_jsonl

pytestmark = pytest.mark.slow

RUN = "crash"
_url: Callable[[Path], str]
"""The store URL of a case's folder (set per store kind by `_each_store`)."""
_durability: str


@pytest.fixture(autouse=True)
def _each_store(store_for, each_durability):
    global _url, _durability
    _url, _durability = store_for, each_durability


def _load(directory: Path) -> RunState | None:
    store = open_store(_url(directory))
    try:
        return store.load(RUN) if store.exists(RUN) else None
    finally:
        store.close()
DECLINE = "access.log was already deleted by the earlier process"


@dataclass(frozen=True, kw_only=True)
class Plan:
    """A run to crash: the argv that starts it, and what the person does at an approval."""

    label: str
    run_argv: tuple[str, ...]
    approve_first: bool = False
    """Stop for approval uninterrupted, then crash the `approve` process instead."""
    writes: bool = False

    @property
    def fault(self) -> str:
        return f"SIGKILL at every boundary: {self.label}"


PLANS = [
    Plan(label="plan", run_argv=("run", "--scenario", "plan", "--run-id", RUN)),
    Plan(
        label="destructive, delete auto-approved",
        run_argv=("run", "--scenario", "destructive", "--run-id", RUN, "--auto-approve", "delete_file"),
        writes=True,
    ),
    Plan(
        label="destructive, approved in a second process",
        run_argv=("run", "--scenario", "destructive", "--run-id", RUN),
        approve_first=True,
        writes=True,
    ),
]


@dataclass(kw_only=True)
class Case:
    """What happened to one kill point, and what it cost."""

    index: int
    boundary: str
    saved_turns: int = 0
    had_intent: bool = False
    steps: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lost: int = 0


def _cli(directory: Path, url: str, *argv: str, crash_at: list[str] | None = None) -> int:
    crash = ["-m", "experiments.reliability.crash", ",".join(crash_at or ()), "--"]
    head = crash if crash_at else ["-m", "harness"]
    proc = subprocess.run(
        [sys.executable, *head, "--store", _url(directory), "--state-dir", str(directory), "--base-url", url,
         *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if proc.returncode not in (0, 3, -9):
        raise AssertionError(f"{argv} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return proc.returncode


def _in_process(directory: Path, url: str, *argv: str, record: list[str] | None = None) -> int:
    checkpoint = record.append if record is not None else None
    return harness_main(["--store", _url(directory), "--state-dir", str(directory), "--base-url", url, *argv],
                        checkpoint=checkpoint)


def _decide(state: RunState, directory: Path) -> tuple[str, ...]:
    """The person: approve a delete, unless it is in doubt and access.log is already gone."""
    stop = state.interruption
    assert isinstance(stop, Approval)
    gone = not (directory / "sandboxes" / RUN / "access.log").exists()
    if stop.in_doubt and gone:
        return ("reject", RUN, stop.call_id, "--reason", DECLINE)
    return ("approve", RUN, stop.call_id)


def _start_stage(plan: Plan, directory: Path, url: str, record: list[str] | None = None) -> list[str]:
    """Bring the run to where the crashed process starts; the argv of that process."""
    if not plan.approve_first:
        return list(plan.run_argv)
    assert _in_process(directory, url, *plan.run_argv) == 3
    state = _load(directory)
    assert isinstance(state.interruption, Approval) and not state.interruption.in_doubt
    return list(_decide(state, directory))


def _reference(plan: Plan, directory: Path, url: str, *, decline: bool) -> tuple[RunState, list[str]]:
    """An uninterrupted run with the same decisions, and the boundaries the crashed process passes."""
    boundaries: list[str] = []
    if decline:  # the transcript an in-doubt rejection produces, with no crash anywhere
        assert _in_process(directory, url, "run", "--scenario", "destructive", "--run-id", RUN) == 3
        assert _in_process(directory, url, "reject", RUN, "c2", "--reason", DECLINE) == 0
    else:
        argv = _start_stage(plan, directory, url)
        assert _in_process(directory, url, *argv, record=boundaries) == 0
    return _load(directory), boundaries


def _recover(plan: Plan, directory: Path, url: str, case: Case) -> RunState:
    for _ in range(6):
        state = _load(directory)
        if state is None:
            argv: tuple[str, ...] = plan.run_argv
        else:
            if state.status == "completed":
                return state
            if isinstance(state.interruption, Approval):
                argv = _decide(state, directory)
                if state.interruption.in_doubt:
                    case.steps.append(f"in doubt -> {argv[0]}")
            else:
                argv = ("resume", RUN)
        case.steps.append(argv[0])
        _cli(directory, url, *argv)
    raise AssertionError(f"run did not complete after {case.steps}")


def _crash_case(
    plan: Plan,
    index: int,
    boundaries: list[str],
    tmp: Path,
    url: str,
    requests: RequestLog,
    references: dict[bool, RunState],
) -> Case:
    directory = tmp / f"{index:02d}"
    case = Case(index=index, boundary=boundaries[index])
    requests.reset()
    argv = _start_stage(plan, directory, url)
    rc = _cli(directory, url, *argv, crash_at=boundaries[: index + 1])
    if rc != -9:
        case.problems.append(f"the process was not killed (exit {rc})")
    died = _load(directory)  # raises if a kill ever left a corrupt run
    if died is not None:
        case.saved_turns, case.had_intent = died.turns, bool(died.intents)
    elif plan.approve_first or "mid_save" in boundaries[:index]:  # a save went on to commit
        case.problems.append("nothing saved although a save had completed")
    final = _recover(plan, directory, url, case)

    declined = any(s == "in doubt -> reject" for s in case.steps)
    ref = references[declined]
    if final.messages != ref.messages or final.turns != ref.turns:
        case.problems.append(f"transcript differs: {final.turns} turns, {len(final.messages)} messages")
        case.lost += 1
    if abs(final.cost_usd - ref.cost_usd) > 1e-12 or final.usage != ref.usage:
        case.problems.append(f"cost ${final.cost_usd:.6f} != uninterrupted ${ref.cost_usd:.6f}")
        case.lost += 1
    per_turn = requests.per_turn()
    repeated = sum(per_turn[t] - 1 for t in range(case.saved_turns) if per_turn[t] > 1)
    extra = sum(per_turn.values()) - ref.turns
    if repeated or extra > 1 or set(per_turn) != set(range(ref.turns)):
        case.problems.append(
            f"model calls per turn index {dict(sorted(per_turn.items()))} "
            f"(uninterrupted: one each for 0..{ref.turns - 1}); "
            f"{case.saved_turns} turn(s) were saved at the kill"
        )
        case.lost += max(repeated, extra - 1, 1)
    events = read_jsonl(directory / "traces" / f"{RUN}.jsonl")
    deletes = sum(1 for e in events if e["type"] == "tool_start" and e["toolName"] == "delete_file")
    if plan.writes:
        gone = not (directory / "sandboxes" / RUN / "access.log").exists()
        if deletes != 1 or not gone:
            case.problems.append(f"delete_file ran {deletes} time(s); access.log gone: {gone}")
            case.lost += abs(deletes - 1) or 1
        asked = any(e["type"] == "approval_required" and e.get("inDoubt") for e in events)
        if case.had_intent and not asked:
            case.problems.append("a write in doubt was not asked about")
            case.lost += 1
    elif deletes:
        case.problems.append(f"delete_file ran {deletes} time(s) in a read-only scenario")
        case.lost += deletes
    case.steps.append(f"model calls {sum(per_turn.values())} (+{extra} for the lost in-flight turn)")
    return case


def _moment(boundaries: list[str], index: int, turns_before: int) -> str:
    """Where in the run a boundary falls, in words ("before saving turn 2's reply", ...)."""
    turns = turns_before + boundaries[: index + 1].count("after_model_reply")
    if boundaries[index].startswith("after_"):
        return {
            "after_model_reply": f"turn {turns}'s reply in (saved now only if none of its calls runs)",
            "after_intent": "a write's intent saved",
            "after_tool_result": "a tool result in (saved now for a write, else with its turn)",
        }[boundaries[index]]
    following = next((b for b in boundaries[index:] if b.startswith("after_")), None)
    saving = {
        "after_model_reply": f"turn {turns + 1}'s reply",
        "after_intent": "a write's intent",
        "after_tool_result": "a tool result (a read-only one with its turn's reply)",
        None: "the final status",
    }[following]
    return f"{'before' if boundaries[index] == 'before_save' else 'in the middle of'} saving {saving}"


def _indexes(boundaries: list[str]) -> list[int]:
    """Every index under RELIABILITY_FULL; else each boundary's first occurrence and the last one."""
    if FULL:
        return list(range(len(boundaries)))
    return sorted({boundaries.index(name) for name in boundaries} | {len(boundaries) - 1})


@pytest.mark.parametrize(
    "plan", PLANS, ids=lambda p: p.label.split(",")[0] + ("-approve" if p.approve_first else "")
)
def test_sigkill_at_every_boundary_resumes_with_nothing_lost_or_repeated(
    plan, counted_mock, tmp_path, ledger, capsys
):
    url, requests = counted_mock
    reference, boundaries = _reference(plan, tmp_path / "reference", url, decline=False)
    assert reference.status == "completed" and set(boundaries) >= {
        "before_save",
        "mid_save",
        "after_model_reply",
    }
    if plan.writes:
        assert {"after_intent", "after_tool_result"} <= set(boundaries)
        declined, _ = _reference(plan, tmp_path / "reference-declined", url, decline=True)
    else:
        declined = reference
    references = {False: reference, True: declined}

    cases = [
        _crash_case(plan, i, boundaries, tmp_path, url, requests, references) for i in _indexes(boundaries)
    ]
    capsys.readouterr()
    before = reference.turns - boundaries.count("after_model_reply")  # turns made before the crashed process
    for c in cases:
        where = f"#{c.index + 1}/{len(boundaries)} {c.boundary}, {_moment(boundaries, c.index, before)}"
        ledger.record(
            f"{plan.fault} ({_url(tmp_path / 'reference').split(':', 1)[0]}, {_durability})",
            where,
            survived=int(not c.problems),
            lost=c.lost,
            detail=f"saved turns {c.saved_turns}; " + "; ".join(c.steps + c.problems),
        )
    failed = [
        f"#{c.index} {c.boundary} (saved turns {c.saved_turns}): {'; '.join(c.problems)}"
        for c in cases
        if c.problems
    ]
    assert not failed, f"{len(failed)} of {len(cases)} kill points lost or repeated work:\n" + "\n".join(
        failed
    )
