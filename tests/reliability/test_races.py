"""Two processes on one run: every race ends with one winner, a refused loser, one delete.

Separate OS processes share one state folder and are synchronised without sleeps:
`python -m experiments.reliability.crash gate -- …` waits at a start barrier (`READY` on stderr, then a
line on stdin) so a test releases them together; `hold:BOUNDARY -- …` stops inside the run
at a named checkpoint (`HOLDING`) while another process tries, then goes on when released.

Every trial runs against SQLite and PostgreSQL, at each durability. Each checks the harness's
promises: delete_file ran at most once (its `tool_start` events in the run's JSONL trace, which
every process appends to), the saved run matches the sandbox (the file is gone exactly when the
record says it was deleted), and every loser was refused (exit 4, saying why) rather than acting.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from reliability_support import FULL, ROOT

from experiments.reliability.crash import HOLDING, READY
from harness import RunState, open_store
from harness.cli import REFUSED
from harness.cli import main as harness_main
from harness.state import Approval
from harness.trace import read_jsonl

pytestmark = pytest.mark.slow

RUN = "race"
TRIALS = 50 if FULL else 3
HELD_TRIALS = 50 if FULL else 2
"""Four processes a trial: fewer in the `make test` size."""


@dataclass(frozen=True, kw_only=True)
class Ended:
    argv: tuple[str, ...]
    code: int
    stderr: str


_url: Callable[[Path], str]
"""The store URL of a trial's folder (set per store kind by `_each_store`)."""
_durability: str


@pytest.fixture(autouse=True)
def _each_store(store_for, each_durability):
    global _url, _durability
    _url, _durability = store_for, each_durability


def _load(directory: Path) -> RunState:
    store = open_store(_url(directory))
    try:
        return store.load(RUN)
    finally:
        store.close()


def _argv(directory: Path, url: str, *args: str) -> list[str]:
    return ["--store", _url(directory), "--state-dir", str(directory), "--base-url", url, *args]


def _spawn(spec: str, directory: Path, url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "experiments.reliability.crash", spec, "--", *_argv(directory, url, *args)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for(proc: subprocess.Popen[str], marker: str) -> list[str]:
    """Read the process's stderr up to the marker line (or its end)."""
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.strip() == marker:
            return lines
    raise AssertionError(f"process ended before {marker}: {''.join(lines)[-1500:]}")


def _finish(proc: subprocess.Popen[str], argv: tuple[str, ...], seen: list[str]) -> Ended:
    _, err = proc.communicate(input="go\n", timeout=60)
    return Ended(argv=argv, code=proc.returncode, stderr="".join(seen) + err)


def _together(directory: Path, url: str, *commands: tuple[str, ...]) -> list[Ended]:
    """Start every command, wait until all stand at the barrier, release them at once."""
    procs = [_spawn("gate", directory, url, *c) for c in commands]
    seen = [_wait_for(p, READY) for p in procs]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return [_finish(p, c, s) for p, c, s in zip(procs, commands, seen, strict=True)]


def _stopped_for_approval(directory: Path, url: str, *, approved: bool = False) -> str:
    """A destructive run waiting for its delete (approved but not resumed, if asked); the call id."""
    assert harness_main(_argv(directory, url, "run", "--scenario", "destructive", "--run-id", RUN)) == 3
    stop = _load(directory).interruption
    assert isinstance(stop, Approval) and stop.tool_name == "delete_file"
    if approved:
        assert harness_main(_argv(directory, url, "approve", RUN, stop.call_id, "--no-resume")) == 3
    return stop.call_id


def _problems(directory: Path, ended: list[Ended], *, winners: int = 1) -> tuple[list[str], RunState]:
    """What broke a promise in one trial (empty when every promise held)."""
    problems = []
    events = read_jsonl(directory / "traces" / f"{RUN}.jsonl")
    deletes = sum(1 for e in events if e["type"] == "tool_start" and e["toolName"] == "delete_file")
    state = _load(directory)
    gone = not (directory / "sandboxes" / RUN / "access.log").exists()
    recorded = any(r.tool == "delete_file" and r.ok for r in state.tool_runs)
    if deletes > 1:
        problems.append(f"delete_file ran {deletes} times")
    if gone != recorded or deletes != int(recorded):
        problems.append(f"access.log gone={gone}, but the record says deleted={recorded} ({deletes} starts)")
    won = [e for e in ended if e.code != REFUSED]
    if len(won) != winners:
        problems.append(f"{len(won)} winner(s): exits {[(e.argv[0], e.code) for e in ended]}")
    for e in ended:
        if e.code == REFUSED and "refused" not in e.stderr:
            problems.append(f"{e.argv[0]} exited {REFUSED} without saying why: {e.stderr[-300:]}")
        if "Traceback" in e.stderr:
            problems.append(f"{e.argv[0]} crashed: {e.stderr[-600:]}")
    return problems, state


def _trials(ledger, fault: str, n: int, tmp_path: Path, trial: Callable[[Path], list[str]]) -> None:
    """Run `trial` in `n` fresh state folders; one ledger row; fail on any broken promise."""
    results = [trial(tmp_path / str(i)) for i in range(n)]
    bad = [p for p in results if p]
    kind = _url(tmp_path / "0").split(":", 1)[0]
    ledger.record(f"{fault} ({kind}, {_durability})", f"{n} trials", tried=n, survived=n - len(bad),
                  lost=len(bad), detail="; ".join(sorted({x for p in bad for x in p}))[:300])
    assert not bad, bad[:3]


def test_approve_against_approve_runs_the_delete_once(counted_mock, tmp_path, ledger):
    url, _ = counted_mock

    def trial(d: Path) -> list[str]:
        cid = _stopped_for_approval(d, url)
        problems, state = _problems(d, _together(d, url, ("approve", RUN, cid), ("approve", RUN, cid)))
        return problems + ([f"run ended {state.status}"] if state.status != "completed" else [])

    _trials(ledger, "two processes: approve || approve", TRIALS, tmp_path, trial)


def test_approve_reject_approve_has_exactly_one_winner_and_the_record_matches(counted_mock, tmp_path, ledger):
    url, _ = counted_mock

    def trial(d: Path) -> list[str]:
        cid = _stopped_for_approval(d, url)
        ended = _together(d, url, ("approve", RUN, cid), ("reject", RUN, cid, "--reason", "keep it"),
                          ("approve", RUN, cid))
        problems, state = _problems(d, ended)
        rejected = [r.call_id for r in state.rejections] == [cid]
        ran = any(r.tool == "delete_file" for r in state.tool_runs)
        winner = next((e.argv[0] for e in ended if e.code != REFUSED), None)
        if rejected == ran or (winner == "reject") != rejected:
            problems.append(f"winner {winner}, but rejected={rejected}, delete ran={ran}")
        return problems

    _trials(ledger, "two processes: approve || reject || approve", TRIALS, tmp_path, trial)


def test_plain_approve_against_plain_reject_has_one_winner_and_the_loser_exits_4(
    counted_mock, tmp_path, ledger
):
    url, _ = counted_mock

    def trial(d: Path) -> list[str]:
        _stopped_for_approval(d, url)
        ended = _together(d, url, ("approve", RUN), ("reject", RUN, "--reason", "keep it"))
        problems, _ = _problems(d, ended)
        return problems + [f"{e.argv[0]} exited 2: {e.stderr[-200:]}" for e in ended if e.code == 2]

    _trials(ledger, "two processes: approve RUN || reject RUN (no call id)", TRIALS, tmp_path, trial)


def test_resume_against_resume_runs_the_approved_delete_once(counted_mock, tmp_path, ledger):
    url, _ = counted_mock

    def trial(d: Path) -> list[str]:
        _stopped_for_approval(d, url, approved=True)
        ended = _together(d, url, ("resume", RUN), ("resume", RUN))
        # A loser that starts only after the winner finished finds nothing to resume (exit 2).
        late = [e for e in ended if e.code == 2 and "nothing to resume" in e.stderr]
        problems, state = _problems(d, [e for e in ended if e not in late])
        return problems + ([f"run ended {state.status}"] if state.status != "completed" else [])

    _trials(ledger, "two processes: resume || resume", TRIALS, tmp_path, trial)


def test_resume_or_a_decision_while_the_run_is_running_is_refused_at_once(counted_mock, tmp_path, ledger):
    url, _ = counted_mock

    def trial(d: Path) -> list[str]:
        cid = _stopped_for_approval(d, url, approved=True)
        owner = _spawn("hold:after_intent", d, url, "resume", RUN)
        seen = _wait_for(owner, HOLDING)  # intent saved, delete not yet run: on disk it is "running"
        tries = [("resume", RUN), ("approve", RUN, cid), ("reject", RUN, cid, "--reason", "no")]
        procs = [subprocess.Popen([sys.executable, "-m", "harness", *_argv(d, url, *args)], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for args in tries]
        others = [Ended(argv=args, stderr=p.communicate(timeout=60)[1], code=p.returncode)
                  for args, p in zip(tries, procs, strict=True)]
        first = _finish(owner, ("resume (owner)",), seen)
        problems, state = _problems(d, [first, *others])
        if first.code != 0 or state.status != "completed":
            problems.append(f"the owner exited {first.code}, run {state.status}")
        if not all(f"process {owner.pid}" in e.stderr for e in others):
            problems.append("a refusal did not name the owning process")
        return problems

    _trials(ledger, "two processes: resume/approve/reject while running", HELD_TRIALS, tmp_path, trial)
