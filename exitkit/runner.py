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
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from exitkit.child import CANNOT_LOAD
from exitkit.contract import Decision, Outcome, decision_to_json
from exitkit.journal import CHAT, RUN_PREFIX, Entry, Journal
from exitkit.ledger import Event
from exitkit.raw import replay
from exitkit.setup import Setup

RUN_TIMEOUT_S = 120.0
"""A run that takes longer is stopped by the kit and reported as such."""
SETTLE_S = 0.5
"""How long tasks a run started may go on after it returns before the kit cancels them."""


BLOCKED_GRACE_S = 5.0
"""How long past the timeout a run that blocks the event loop (so the timeout cannot fire) is let go on."""


class _Blocked(BaseException):
    """Raised inside a run that blocked the event loop past the kit's timeout; a BaseException, so
    an agent's `except Exception` does not swallow it."""


@contextmanager
def _unblocking(seconds: float) -> Iterator[None]:
    """A run blocked in a synchronous wait never lets `wait_for`'s timeout fire; a SIGALRM raises
    `_Blocked` in it instead. Only the main thread may take signals: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kit = asyncio.current_task()

    def blocked(signum: int, frame: Any) -> None:
        # Only inside a task of the run's: raised in the event loop's own code (idle, so not blocked)
        # or in the kit's, it would end the whole card.
        if asyncio.current_task() not in (None, kit):
            raise _Blocked

    previous = signal.signal(signal.SIGALRM, blocked)
    armed, since = signal.setitimer(signal.ITIMER_REAL, seconds), time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if armed[0]:  # the caller's own alarm (pytest-timeout's, say) goes on, late rather than lost
            signal.setitimer(signal.ITIMER_REAL, max(armed[0] - (time.monotonic() - since), 1e-6), armed[1])


class ChildLoadError(RuntimeError):
    """The new process could not load the adapter that loaded here: no verdict can rest on it."""


class ForeignAPI(ValueError):
    """A run spoke an API the kit does not read (Responses, Messages, …), or asked another model or
    URL than the job's: no verdict can rest on it."""


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
    stop_wall: float | None = None
    """`time.time()` when Stop was pressed, comparable with the journal's `started`."""
    returncode: int = 0
    """The child's exit status; -9 when it SIGKILLed itself."""
    peak_rss_kib: int = 0
    left_running: int = 0
    """Tasks the run started that still ran `SETTLE_S` after it returned; the kit cancelled them, so
    nothing a finished run left behind sends requests into the next measurement."""

    def __post_init__(self) -> None:
        # The kit reads Chat Completions only: a run that spoke another API would look like no run.
        if foreign := sorted({e.path for e in self.entries if not e.path.endswith(CHAT)}):
            raise ForeignAPI(f"the agent sent requests to {', '.join(foreign)}; the kit judges Chat "
                             "Completions only (POST job.base_url + /chat/completions)")

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
    def cost_or_unknown(self) -> float | None:
        """The spend for a figure beside a verdict that does not rest on it: None when unknown."""
        try:
            return round(self.cost_usd, 6)
        except ValueError:
            return None

    @property
    def wall_s(self) -> float:
        return self.ended - self.started

    @property
    def mock_s(self) -> float:
        return sum(e.mock_s for e in self.entries)

    def after_stop(self) -> list[Entry]:
        """Requests that reached the mock after Stop was pressed (one in flight then is not one)."""
        return [] if self.stop_wall is None else [e for e in self.requests if e.started >= self.stop_wall]

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
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    """The environment when the kit started: a new process gets this, not what a run left behind."""
    timeouts: list[str] = field(default_factory=list)
    """What the kit said of each run it had to stop at its timeout, in order (a case reads the new ones)."""
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
        url = urlsplit(self.base_url)
        base_url = urlunsplit(url._replace(path=RUN_PREFIX + folder.name + url.path))  # see RUN_PREFIX
        return Setup(base_url=base_url, scenario=scenario, folder=folder, **options).make()

    async def measure(self, adapter: Any, setup: Setup, *, guard: int | None = None,
                      stop_at: float | None = None) -> Run:
        job = setup.job()
        pressed: list[tuple[float, float]] = []

        def press() -> None:
            pressed.append((time.perf_counter(), time.time()))
            job.cancel.set()

        before = asyncio.all_tasks()
        with self.journal.window(guard=guard, run=setup.folder.name) as seen:
            started = time.perf_counter()
            button = asyncio.get_running_loop().call_later(stop_at, press) if stop_at is not None else None
            late = f"no result within {self.timeout_s:g} s"
            try:
                with _unblocking(self.timeout_s + BLOCKED_GRACE_S):
                    # Its own task, so `_unblocking` tells it from the kit's (3.12's wait_for runs a
                    # coroutine in the caller's task).
                    outcome = await asyncio.wait_for(asyncio.ensure_future(adapter.run(job)), self.timeout_s)
            except TimeoutError:
                outcome = Outcome(status="kit timeout", error=late)
                self.timeouts.append(late)
            except _Blocked:
                outcome = Outcome(status="kit timeout", error=f"{late}: the run blocked the event loop (a "
                                  "synchronous wait in async code)")
                self.timeouts.append(late)
            except Exception as e:  # what escapes is the outcome
                outcome = Outcome.raised(e)
            ended = time.perf_counter()
            if button is not None:
                button.cancel()
            left = await _settle(asyncio.all_tasks() - before - {asyncio.current_task()})
            events = setup.ledger.events()  # before the kit's own cancels, which are not the agent's
            await _cancel(left)
        if not isinstance(outcome, Outcome):
            outcome = Outcome(status="returned", answer=str(outcome))
        stop_pressed, stop_wall = pressed[0] if pressed else (None, None)
        return _as_handed(Run(outcome=outcome, entries=seen, events=events, started=started, ended=ended,
                              stop_pressed=stop_pressed, stop_wall=stop_wall, left_running=len(left)), setup)

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
        env = self.env | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with self.journal.window(guard=guard, run=setup.folder.name) as seen:
            started = time.perf_counter()
            try:
                # No stdin: a framework that prompts on the terminal gets end-of-file, not the user's keys.
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                      timeout=self.timeout_s, env=env, check=False)
                rc, out, err = done.returncode, done.stdout, done.stderr
            except subprocess.TimeoutExpired:
                rc, out, err = -1, "", f"no result within {self.timeout_s:g} s"
                self.timeouts.append(f"{command} in a new process: {err}")
            ended = time.perf_counter()
        got = _last_json(out)
        if got is None and rc == CANNOT_LOAD:
            raise ChildLoadError(f"could not load the adapter in a new process: {err.strip()[-300:]}")
        if got is None:
            why = "killed itself (SIGKILL)" if rc == -9 else f"exited {rc}: {err.strip()[-600:]}"
            outcome = Outcome(status="process ended without a result", error=why)
        else:
            outcome = Outcome(**got["outcome"])
        peak = (got or {}).get("peak_rss_kib", 0)
        return _as_handed(Run(outcome=outcome, entries=seen, events=setup.ledger.events(), started=started,
                              ended=ended, returncode=rc, peak_rss_kib=peak), setup)


async def _settle(born: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """The tasks of `born` still running after a grace for them to finish (a save, a cancellation)."""
    if not born:
        return set()
    _, pending = await asyncio.wait(born, timeout=SETTLE_S)
    return pending


async def _cancel(tasks: set[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=SETTLE_S)


def _as_handed(run: Run, setup: Setup) -> Run:
    """`run`, if every request it sent asked the job's model at the job's URL; a model name or an
    options path of the agent's own picks another scenario, so no verdict can rest on it."""
    path = urlsplit(setup.base_url).path.removeprefix(RUN_PREFIX + setup.folder.name).rstrip("/") + CHAT
    asked = sorted({f"{e.request.get('model')!r} at {e.path}" for e in run.requests
                    if e.path != path or e.request.get("model") != setup.scenario})
    if asked:
        raise ForeignAPI(f"the agent asked for {', '.join(asked)[:300]}; the kit handed it "
                         f"{setup.scenario!r} at {path} (job.model at job.base_url)")
    return run


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "outcome" in data:
            return data
    return None
