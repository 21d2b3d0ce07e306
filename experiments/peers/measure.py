"""Run every exit through every peer against one journalled mock; return the rows.

Each run gets a fresh sandbox and a journal window, so its requests, tokens and the texts sent
back to the model are read at the mock. Runs are sequential (one window at a time) except the
approval resume and the memory probe, which are child processes talking to the same mock.
"""

from __future__ import annotations

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
OVERHEAD_RUNS = (("plan", 20, 3), ("runaway", 20, 3), ("runaway", 100, 2))
"""(scenario, turn cap, rounds): cap 100 takes ~10 s a run for a framework, so it gets fewer."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    ending: Ending
    entries: list[Entry]
    """What the mock saw during the run."""
    tool_runs: list[str]
    wall_s: float
    warned: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.entries)

    @property
    def prompt_tokens(self) -> int:
        return sum(e.prompt_tokens for e in self.entries)

    @property
    def cost_usd(self) -> float:
        return sum(e.cost_usd for e in self.entries)

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
            wall = time.perf_counter() - started
        return Measured(ending=ending, entries=seen, tool_runs=case.folder.runs(), wall_s=wall,
                        warned=sorted({type(w.message).__name__ for w in caught}))

    def child(self, command: str, module: str, case: Case) -> dict[str, Any]:
        argv = [sys.executable, "-m", "experiments.peers.child", command, module, self.base_url,
                str(case.folder.root.parent)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"child {command} {module} failed:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def peers() -> list[ModuleType]:
    return [import_module(f"experiments.peers.{name}") for name in PEERS]


async def turn_cap(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    case = lab.case()
    m = await lab.measure(case, peer.run(case, "runaway", CAP))
    return [{"framework": peer.NAME, "caller gets": m.ending.how, "message": m.ending.text,
             "requests": m.requests, "tool runs": len(m.tool_runs), "prompt tokens": m.prompt_tokens,
             "cost": round(m.cost_usd, 6)}]


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
    with lab.journal.window() as resumed_seen:
        resumed = lab.child("approve", peer.__name__.rsplit(".", 1)[1], case)
    deletions = [r for r in case.folder.runs() if r.startswith("delete_file")]
    return [{"framework": peer.NAME, "stops with": stop.ending.how, "waiting call": stop.ending.text,
             "deleted before approval": len(deleted_before),
             "resumed in a new process": resumed["how"], "answer": resumed["text"],
             "delete_file runs in total": len(deletions),
             "requests": stop.requests + len(resumed_seen)}]


async def cancellation(lab: Lab, peer: ModuleType) -> list[dict[str, Any]]:
    case = lab.case()
    m = await lab.measure(case, peer.stop_slow(case, STOP_AT_S))
    return [{"framework": peer.NAME, "Stop pressed at ms": round(STOP_AT_S * 1000),
             "run ended at ms": round(m.wall_s * 1000),
             "Stop to end ms": round((m.wall_s - STOP_AT_S) * 1000),
             "caller gets": m.ending.how, "tool saw it": "scan_archive:cancelled" in m.tool_runs,
             "tool finished anyway": "scan_archive:finished" in m.tool_runs}]


async def overhead(lab: Lab, modules: list[ModuleType]) -> list[dict[str, Any]]:
    """Client time minus the mock's own time, per request; peers interleaved in every round."""
    plan = (("plan", 20, 1),) if lab.fast else OVERHEAD_RUNS
    samples: dict[tuple[str, str, int], list[tuple[float, int]]] = {}
    for round_ in range(max(rounds for *_, rounds in plan)):
        for scenario, cap, _ in (p for p in plan if round_ < p[2]):
            for peer in modules:
                case = lab.case()
                m = await lab.measure(case, peer.run(case, scenario, cap))
                per_turn = (m.wall_s - m.mock_s) / max(m.requests, 1)
                samples.setdefault((peer.NAME, scenario, cap), []).append((per_turn, m.requests))
    return [{"framework": name, "run": f"{scenario}, cap {cap}", "requests": got[0][1],
             "overhead per turn ms": round(statistics.median(p for p, _ in got) * 1000, 2),
             "rounds": len(got)}
            for (name, scenario, cap), got in samples.items()]


HWM = "import pathlib; print(next(l.split()[1] for l in pathlib.Path('/proc/self/status').read_text()"\
      ".splitlines() if l.startswith('VmHWM:')))"


def _bare_kib(imports: str) -> int:
    """Peak RSS of a bare interpreter that only runs `imports`."""
    done = subprocess.run([sys.executable, "-c", f"{imports}\n{HWM}"], capture_output=True, text=True,
                          timeout=60, check=True)
    return int(done.stdout.strip())


def memory(lab: Lab, modules: list[ModuleType]) -> list[dict[str, Any]]:
    """Peak RSS of a fresh process running `plan`, and what it adds above the lab's shared base.

    Every child imports the `experiments` package, harness included; so for our row the harness's
    own import (a bare interpreter importing it, minus one importing nothing) is added back.
    """
    base = lab.child("rss", "none", lab.case())["peak_rss_kib"]
    harness_import = _bare_kib("import harness") - _bare_kib("pass")
    rows = []
    for peer in modules:
        got = lab.child("rss", peer.__name__.rsplit(".", 1)[1], lab.case())
        own = got["peak_rss_kib"] - base + (harness_import if peer.PACKAGE == "harness-lab" else 0)
        rows.append({"framework": peer.NAME, "answer": got["text"],
                     "peak RSS MiB": round(got["peak_rss_kib"] / 1024, 1),
                     "lab base MiB": round(base / 1024, 1), "its own MiB": round(own / 1024, 1)})
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
