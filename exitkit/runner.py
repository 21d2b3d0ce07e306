"""The kit's side of a run: the mock on a loopback port, a fresh folder per run, the adapter
run in this process or resumed in a new one, and what the provider and the ledger saw.

`Kit.serve()` starts the scripted provider under uvicorn on an ephemeral 127.0.0.1 port,
wrapped in the kit's journal. `measure` runs `adapter.run(job)` here, inside a journal window,
pressing Stop at `stop_at` seconds if asked; `child` runs `adapter.resume(job, decision)` (or
a memory probe) in a fresh interpreter, `python -m exitkit.child`, against the same mock.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

from exitkit.contract import Decision, Outcome, decision_to_json
from exitkit.journal import Entry, Journal
from exitkit.ledger import Event
from exitkit.raw import replay
from exitkit.setup import Setup

RUN_TIMEOUT_S = 120.0
"""A run that takes longer is stopped by the kit and reported as such."""


@dataclass(frozen=True, kw_only=True)
class Run:
    """One run as the kit saw it."""

    outcome: Outcome
    entries: list[Entry]
    """Every chat request the mock received during the run."""
    events: list[Event]
    """The run folder's whole ledger after the run (earlier processes included)."""
    started: float
    ended: float
    """`time.perf_counter()` around the run (in this process), or around the child."""
    stop_pressed: float | None = None
    returncode: int = 0
    """The child's exit status; -9 when it SIGKILLed itself."""
    peak_rss_kib: int = 0

    @property
    def requests(self) -> list[Entry]:
        """What the agent asked the model (the kit's guard refusals left out)."""
        return [e for e in self.entries if not e.guarded]

    @property
    def guarded(self) -> bool:
        return any(e.guarded for e in self.entries)

    @property
    def cost_usd(self) -> float:
        """Spend at the mock's billed tokens; a reply without usage makes it unknown (an error)."""
        if unbilled := sum(e.unbilled for e in self.requests):
            raise ValueError(f"{unbilled} replies carried no usage (a stream without include_usage): "
                             "their tokens, and so the spend, are unknown")
        return sum(e.cost_usd for e in self.requests)

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    @property
    def mock_s(self) -> float:
        return sum(e.mock_s for e in self.entries)

    def last_text(self) -> str:
        """The last answer the mock gave in text."""
        return next((e.reply_text for e in reversed(self.requests) if e.reply_text), "")

    def said(self) -> str:
        """What the caller got, in one line."""
        o = self.outcome
        return " · ".join(part for part in (o.status, o.error or o.answer) if part)


@dataclass(kw_only=True)
class Kit:
    journal: Journal
    base_url: str
    workdir: Path
    timeout_s: float = RUN_TIMEOUT_S
    _ids: Iterator[int] = field(default_factory=count)

    @classmethod
    @contextmanager
    def serve(cls, workdir: Path) -> Iterator[Kit]:
        from mockprovider.app import create_app
        from mockprovider.server import serve_in_thread

        journal = Journal(create_app())
        with serve_in_thread(journal) as base_url:
            yield cls(journal=journal, base_url=base_url, workdir=workdir)

    def setup(self, scenario: str, **options: Any) -> Setup:
        folder = self.workdir / f"run-{next(self._ids)}-{scenario}"
        return Setup(base_url=self.base_url, scenario=scenario, folder=folder, **options).make()

    async def measure(self, adapter: Any, setup: Setup, *, guard: int | None = None,
                      stop_at: float | None = None) -> Run:
        job = setup.job()
        pressed: list[float] = []

        def press() -> None:
            pressed.append(time.perf_counter())
            job.cancel.set()

        with self.journal.window(guard=guard) as seen:
            started = time.perf_counter()
            button = asyncio.get_running_loop().call_later(stop_at, press) if stop_at is not None else None
            try:
                outcome = await asyncio.wait_for(adapter.run(job), self.timeout_s)
            except TimeoutError:
                outcome = Outcome(status="kit timeout", error=f"no result within {self.timeout_s:g} s")
            except Exception as e:  # what escapes is the outcome
                outcome = Outcome.raised(e)
            ended = time.perf_counter()
            if button is not None:
                button.cancel()
        if not isinstance(outcome, Outcome):
            outcome = Outcome(status="returned", answer=str(outcome))
        return Run(outcome=outcome, entries=seen, events=setup.ledger.events(), started=started, ended=ended,
                   stop_pressed=pressed[0] if pressed else None)

    async def replay(self, bodies: list[dict[str, Any]]) -> Run:
        """The bare `httpx` floor: the same bodies, sent one after another, in a journal window."""
        with self.journal.window() as seen:
            started = time.perf_counter()
            ok = await replay(self.base_url, bodies)
            ended = time.perf_counter()
        return Run(outcome=Outcome(status="replayed", answer=f"{ok} of {len(bodies)} ok"), entries=seen,
                   events=[], started=started, ended=ended)

    def child(self, spec: str, setup: Setup, command: str = "resume", decision: Decision | None = None,
              *, guard: int | None = None) -> Run:
        """Run `command` for the adapter `spec` in a new interpreter, inside a journal window."""
        job_file = setup.folder / f"job-{next(self._ids)}.json"
        setup.save(job_file)
        argv = [sys.executable, "-m", "exitkit.child", command, spec, str(job_file),
                json.dumps(decision_to_json(decision))]
        env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with self.journal.window(guard=guard) as seen:
            started = time.perf_counter()
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, env=env,
                                      check=False)
                rc, out, err = done.returncode, done.stdout, done.stderr
            except subprocess.TimeoutExpired:
                rc, out, err = -1, "", f"no result within {self.timeout_s:g} s"
            ended = time.perf_counter()
        got = _last_json(out)
        if got is None:
            why = "killed itself (SIGKILL)" if rc == -9 else f"exited {rc}: {err.strip()[-600:]}"
            outcome = Outcome(status="process ended without a result", error=why)
        else:
            outcome = Outcome(**got["outcome"])
        return Run(outcome=outcome, entries=seen, events=setup.ledger.events(), started=started, ended=ended,
                   returncode=rc, peak_rss_kib=(got or {}).get("peak_rss_kib", 0))


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "outcome" in data:
            return data
    return None
