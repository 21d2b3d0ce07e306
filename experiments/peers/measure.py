"""Run every exit through every peer against one journalled mock; return the rows.

Each run gets a fresh sandbox and a journal window, so its requests, tokens and the texts sent
back to the model are read at the mock. Runs are sequential (one window at a time) except the
approval resume and the memory probe, which are child processes talking to the same mock.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import import_module
from itertools import count
from pathlib import Path
from types import ModuleType
from typing import Any

from experiments.peers import PEERS
from experiments.peers.case import Case, Ending
from experiments.peers.folder import Folder
from experiments.peers.journal import Entry, Journal

CAP, BUDGET_USD, OUTSIDE_CAP, STOP_AT_S = 8, 0.01, 60, 1.2
RECOVERED = "errors.log mentions a timeout."
OVERHEAD_RUNS = (("plan", 20, 5), ("runaway", 20, 5), ("runaway", 100, 3))
"""(scenario, turn cap, rounds): cap 100 takes seconds a run for a framework, so it gets fewer."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    ending: Ending
    entries: list[Entry]
    """What the mock saw during the run."""
    tool_runs: list[str]
    started: float
    ended: float
    """`time.perf_counter()` at the start and the end of the run."""
    warned: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    @property
    def requests(self) -> int:
        return len(self.entries)

    def _billed(self) -> list[Entry]:
        if unbilled := [e for e in self.entries if e.unbilled]:
            raise ValueError(f"{len(unbilled)} complete replies carried no usage: their tokens are unknown")
        return self.entries

    @property
    def prompt_tokens(self) -> int:
        return sum(e.prompt_tokens for e in self._billed())

    @property
    def cost_usd(self) -> float:
        return sum(e.cost_usd for e in self._billed())

    @property
    def mock_s(self) -> float:
        return sum(e.mock_s for e in self.entries)


@dataclass(kw_only=True)
class Lab:
    journal: Journal
    base_url: str
    workdir: Path
    fast: bool = False
    """Fewer repetitions (the test suite's smoke pass)."""
    _ids: count = field(default_factory=count)

    def case(self) -> Case:
        directory = self.workdir / f"run-{next(self._ids)}"
        directory.mkdir(parents=True)
        return Case(base_url=self.base_url, folder=Folder.make(directory), state_file=directory / "state")

    async def measure(self, case: Case, job: Awaitable[Ending]) -> Measured:
        with self.journal.window() as seen, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            started = time.perf_counter()
            ending = await job
            ended = time.perf_counter()
        return Measured(ending=ending, entries=seen, tool_runs=case.folder.runs(), started=started,
                        ended=ended, warned=sorted({type(w.message).__name__ for w in caught}))

    def child(self, command: str, module: str, case: Case) -> dict[str, Any]:
        # Run as a script, not `-m`: `-m experiments.peers.child` would import the `experiments`
        # package, and with it every experiment, pandas and matplotlib (see child.py).
        argv = [sys.executable, str(Path(__file__).with_name("child.py")), command, module,
                self.base_url, str(case.folder.root.parent)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"child {command} {module} failed:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def peers() -> list[ModuleType]:
    return [import_module(f"experiments.peers.{name}") for name in PEERS]


def _last_call(m: Measured) -> str:
    """What became of the call in the last reply (every `runaway` reply carries one call), read
    from the tool log and the state the run ended in, not from what the framework says."""
    if len(m.tool_runs) >= m.requests:
        return "ran"
    return "pending, resumable" if m.ending.pending else "dropped"


async def turn_cap(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    rows = []
    for setting, job in peer.caps(CAP):
        case = lab.case()
        m = await lab.measure(case, job(case))
        rows.append({"framework": peer.NAME, "setting": setting, "requests": m.requests,
                     "tool runs": len(m.tool_runs), "call of the last reply": _last_call(m),
                     "caller gets": m.ending.how, "message": m.ending.text,
                     "prompt tokens": m.prompt_tokens, "cost": round(m.cost_usd, 6)})
    return rows


def _first_error_text(entries: list[Entry]) -> str:
    """The tool message answering the failed call `c1`, as the mock received it."""
    for e in entries:
        if "c1" in (texts := e.tool_texts()):
            return texts["c1"]
    return "(nothing: no request carried it)"


async def tool_errors(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    rows = []
    for documented in (False, True):
        case = lab.case()
        m = await lab.measure(case, peer.tool_error(case, documented))
        rows.append({"framework": peer.NAME, "setting": peer.ERROR_SETTING if documented else "default",
                     "text sent back": _first_error_text(m.entries), "caller gets": m.ending.how,
                     "answer": m.ending.text, "recovers": m.ending.text == RECOVERED,
                     "requests": m.requests, "cost": round(m.cost_usd, 6)})
    return rows


async def budget(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    rows = []
    for label, job in peer.budgets(BUDGET_USD, OUTSIDE_CAP):
        case = lab.case()
        m = await lab.measure(case, job(case))
        rows.append({"framework": peer.NAME, "limits that exist": peer.SPEND_LIMITS, "setting": label,
                     "requests": m.requests, "spent": round(m.cost_usd, 6),
                     "overshoot": round(m.cost_usd - BUDGET_USD, 6), "caller gets": m.ending.how,
                     "stopped by": m.ending.text, "warnings": ", ".join(m.warned) or "none"})
    return rows


async def approval(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    case = lab.case()
    stop = await lab.measure(case, peer.approval_stop(case))
    deleted_before = [r for r in case.folder.runs() if r.startswith("delete_file")]
    module = peer.__name__.rsplit(".", 1)[1]
    with lab.journal.window() as resumed_seen:
        resumed = lab.child("approve", module, case)
    deletions = [r for r in case.folder.runs() if r.startswith("delete_file")]
    still_there = (case.folder.root / "access.log").exists()
    # The same saved state, resumed once more: what a retried job or a double click does.
    again = lab.child("approve", module, case)
    return [{"framework": peer.NAME, "stops with": stop.ending.how, "waiting call": stop.ending.text,
             "deleted before approval": len(deleted_before),
             "resumed in a new process": resumed["how"], "answer": resumed["text"],
             "delete_file runs": len(deletions), "access.log still there after approval": still_there,
             "requests": stop.requests + len(resumed_seen),
             "same state resumed again": f"{again['how']}: {again['text']}".rstrip(": "),
             "delete_file runs after that": sum(r.startswith("delete_file") for r in case.folder.runs())}]


async def cancellation(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    """The lab owns the clock: Stop is pressed STOP_AT_S after the run starts, the same way for
    every peer (an event its module waits on before calling its own cancel API)."""
    case = lab.case()
    stop, pressed = asyncio.Event(), []

    def press() -> None:
        pressed.append(time.perf_counter())
        stop.set()

    async def job() -> Ending:
        button = asyncio.get_running_loop().call_later(STOP_AT_S, press)
        try:
            return await peer.stop_slow(case, stop)
        finally:
            button.cancel()

    m = await lab.measure(case, job())
    at = pressed[0] if pressed else None  # None: the run ended before Stop
    return [{"framework": peer.NAME, "Stop pressed at ms": at and round((at - m.started) * 1000),
             "run ended at ms": round(m.wall_s * 1000),
             "Stop to end ms": at and round((m.ended - at) * 1000, 1),
             "caller gets": m.ending.how, "tool saw it": "scan_archive:cancelled" in m.tool_runs,
             "tool finished anyway": "scan_archive:finished" in m.tool_runs}]


def _is_ours(peer: ModuleType) -> bool:
    return peer.PACKAGE == "harness-lab"


async def _round(lab: Lab, order: list[ModuleType], scenario: str, cap: int) -> dict[str, tuple[float, int]]:
    """Per peer: (client time minus the mock's own time, per request; requests) for one run each."""
    got = {}
    for peer in order:
        case = lab.case()
        m = await lab.measure(case, peer.run(case, scenario, cap))
        got[peer.NAME] = ((m.wall_s - m.mock_s) / max(m.requests, 1), m.requests)
    return got


async def overhead(lab: Lab, modules: list[ModuleType]) -> list[dict[str, Any]]:
    """Per-turn overhead as a ratio to ours taken within each round, so the machine's load, which
    drifts between rounds, divides out; peers run in turn, the order rotated every round."""
    plan = (("plan", 20, 1),) if lab.fast else OVERHEAD_RUNS
    ours = next(p.NAME for p in modules if _is_ours(p))
    per_turn: dict[tuple[str, str, int], list[float]] = {}
    ratios: dict[tuple[str, str, int], list[float]] = {}
    requests: dict[tuple[str, str, int], int] = {}
    for round_ in range(max(rounds for *_, rounds in plan)):
        order = modules[round_ % len(modules):] + modules[: round_ % len(modules)]
        for scenario, cap, rounds in plan:
            if round_ >= rounds:
                continue
            got = await _round(lab, order, scenario, cap)
            for name, (value, n) in got.items():
                key = (name, scenario, cap)
                per_turn.setdefault(key, []).append(value)
                ratios.setdefault(key, []).append(value / got[ours][0])
                requests[key] = n
    return [{"framework": name, "run": f"{scenario}, cap {cap}", "requests": requests[key],
             "overhead per turn ms": round(statistics.median(per_turn[key]) * 1000, 2),
             "× ours (median)": round(statistics.median(ratios[key]), 2),
             "× ours (min–max)": f"{min(ratios[key]):.2f}–{max(ratios[key]):.2f}",
             "rounds": len(ratios[key])}
            for key in sorted(per_turn, key=lambda k: (k[1], k[2], [p.NAME for p in modules].index(k[0])))
            for name, scenario, cap in [key]]


HWM = "import pathlib; print(next(l.split()[1] for l in pathlib.Path('/proc/self/status').read_text()"\
      ".splitlines() if l.startswith('VmHWM:')))"


def _bare_kib(imports: str) -> int:
    """Peak RSS of a bare interpreter that only runs `imports`."""
    done = subprocess.run([sys.executable, "-c", f"{imports}\n{HWM}"], capture_output=True, text=True,
                          timeout=60, check=True)
    return int(done.stdout.strip())


def memory(lab: Lab, modules: list[ModuleType]) -> list[dict[str, Any]]:
    """Peak RSS of a fresh process that imports only one peer's module (and the lab's tools, which
    import nothing heavy) and runs `plan`, minus the same bare interpreter for every row."""
    base = _bare_kib("pass")
    rows = []
    for peer in modules:
        got = lab.child("rss", peer.__name__.rsplit(".", 1)[1], lab.case())
        if set(got["imported"]) - ({"harness"} if _is_ours(peer) else set()):
            raise RuntimeError(f"the memory child for {peer.NAME} imported {got['imported']}")
        rows.append({"framework": peer.NAME, "answer": got["text"],
                     "peak RSS MiB": round(got["peak_rss_kib"] / 1024, 1),
                     "bare interpreter MiB": round(base / 1024, 1),
                     "its own MiB": round((got["peak_rss_kib"] - base) / 1024, 1)})
    return rows


EXITS: dict[str, Callable[[Lab, ModuleType], Awaitable[list[dict[str, Any]]]]] = {
    "turn_cap": turn_cap, "tool_errors": tool_errors, "budget": budget,
    "approval": approval, "cancellation": cancellation,
}


async def measure_all(lab: Lab, *, log: Callable[[str], None] = print) -> dict[str, list[dict[str, Any]]]:
    modules = peers()
    tables: dict[str, list[dict[str, Any]]] = {}
    for exit_name, measure_exit in EXITS.items():
        tables[exit_name] = []
        for peer in modules:
            tables[exit_name] += await measure_exit(lab, peer)
        log(f"{exit_name}: {len(tables[exit_name])} rows")
    tables["overhead"] = await overhead(lab, modules)
    log("overhead: done")
    tables["memory"] = memory(lab, modules)
    log("memory: done")
    return tables
