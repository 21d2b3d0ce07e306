"""The kit's side of a run: the mock on a loopback port, a fresh folder per run, the adapter
run in a process of its own, and what the provider and the ledger saw.

`Kit.serve()` starts the scripted provider under uvicorn on an ephemeral 127.0.0.1 port,
wrapped in the kit's journal. `measure` runs `adapter.run(job)` and `child` runs
`adapter.resume(job, decision)` (or a bare `httpx` replay), each in a process of its own (a
fresh fork of the adapter's server, `exitkit.forks`, or a new interpreter; see `exitkit.process`),
inside a journal window; `measure` can press Stop a set time after the ledger shows a tool has
started. A command adapter's spec (`Kit.commands`) runs its own command line instead, its tools
served from this process (`exitkit.command`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from exitkit.child import CANNOT_LOAD, STOP_SIGNAL
from exitkit.command import STOP_SIGNAL as COMMAND_STOP
from exitkit.command import environment, job_file, outcome_line, served_tools
from exitkit.contract import Decision, Outcome, decision_to_json
from exitkit.forks import ForkServer
from exitkit.journal import CHAT, RUN_PREFIX, Entry, Journal
from exitkit.ledger import Event, Ledger
from exitkit.process import Exit, created, excerpt, fork, kill_marked, launch, supervise
from exitkit.setup import Setup

RUN_TIMEOUT_S = 120.0
"""A run (its process, imports included) that takes longer is stopped by the kit and reported as such."""


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
    """`time.monotonic()` around the adapter's call, as its process reported it (around the process
    when it reported nothing)."""
    stop_pressed: float | None = None
    stop_wall: float | None = None
    """`time.time()` when Stop was pressed, comparable with the journal's `started`."""
    returncode: int = 0
    """The child's exit status; -9 when it SIGKILLed itself."""
    peak_rss_kib: int = 0
    left_running: int = 0
    """Tasks the run started that still ran `SETTLE_S` after it returned; they end with its process,
    so nothing a finished run left behind sends requests into the next measurement."""

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
    servers: dict[str, ForkServer | None] = field(default_factory=dict)
    """A fork server per adapter spec (None: runs in new interpreters); shared by `replace()` copies."""
    commands: dict[str, list[str]] = field(default_factory=dict)
    """Spec -> argv of each command adapter (`exitkit.command`); every other spec is a Python adapter."""

    @classmethod
    @contextmanager
    def serve(cls, workdir: Path) -> Iterator[Kit]:
        from mockprovider.app import create_app
        from mockprovider.server import serve_in_thread

        journal = Journal(create_app())
        with serve_in_thread(journal) as base_url:
            kit = cls(journal=journal, base_url=base_url, workdir=workdir)
            try:
                yield kit
            finally:
                kit.close()

    def setup(self, scenario: str, **options: Any) -> Setup:
        folder = self.workdir / f"run-{next(self._ids)}-{scenario}"
        url = urlsplit(self.base_url)
        base_url = urlunsplit(url._replace(path=RUN_PREFIX + folder.name + url.path))  # see RUN_PREFIX
        return Setup(base_url=base_url, scenario=scenario, folder=folder, **options).make()

    def measure(self, spec: str, setup: Setup, *, guard: int | None = None,
                stop: tuple[str, float] | None = None) -> Run:
        """`adapter.run(job)` in a new process; with `stop=(tool, seconds)`, Stop is pressed that
        many seconds after the ledger shows the tool has started."""
        return self.child(spec, setup, "run", guard=guard, stop=stop)

    def replay(self, setup: Setup, bodies: list[dict[str, Any]]) -> Run:
        """The bare `httpx` floor: the same bodies, sent one after another from a new process."""
        with created(setup.folder / "bodies.json") as f:
            f.write(json.dumps(bodies).encode())
        return self.child("-", setup, "raw")

    def child(self, spec: str, setup: Setup, command: str = "resume", decision: Decision | None = None,
              *, guard: int | None = None, stop: tuple[str, float] | None = None) -> Run:
        """Run `command` for the adapter `spec` in a process of its own, inside a journal window."""
        if spec in self.commands:
            return self._command(self.commands[spec], setup, command, decision, guard=guard, stop=stop)
        job_file = setup.folder / f"job-{next(self._ids)}.json"
        setup.save(job_file)
        args = [command, spec, str(job_file), json.dumps(decision_to_json(decision))]
        logs = job_file.with_suffix("")
        stop_when = None if stop is None else _once_started(setup.ledger, *stop)
        server = self._server(spec)
        with self.journal.window(guard=guard, run=setup.folder.name) as seen:
            # The job's path marks every process of this run, those it detaches from its group too.
            env = self._child_env() | {"EXITKIT_JOB": str(job_file)}
            try:
                started = fork(server, args, env, logs) if server is not None else None
            except EOFError:  # the server died (out of memory, killed): new interpreters from now on
                server.close()
                self.servers[spec] = started = None
            if started is None:
                started = launch([sys.executable, "-m", "exitkit.child", *args], env, logs)
            done = supervise(started, logs, timeout_s=self.timeout_s, stop_when=stop_when,
                             stop_signal=STOP_SIGNAL)
            kill_marked(f"EXITKIT_JOB={job_file}")
        got = _last_json(done.stdout)
        if got is None and done.returncode == CANNOT_LOAD:
            raise ChildLoadError(f"could not load the adapter in a new process: {done.stderr.strip()[-300:]}")
        outcome = self._outcome(got, done, command)
        got = got or {}
        return _as_handed(Run(outcome=outcome, entries=seen, events=setup.ledger.events(),
                              started=got.get("started", done.started), ended=got.get("ended", done.ended),
                              stop_pressed=done.stop_pressed, stop_wall=done.stop_wall,
                              returncode=-1 if done.returncode is None else done.returncode,
                              peak_rss_kib=got.get("peak_rss_kib", 0),
                              left_running=got.get("left_running", 0)), setup)

    def _command(self, argv: list[str], setup: Setup, action: str, decision: Decision | None, *,
                 guard: int | None, stop: tuple[str, float] | None) -> Run:
        """A command adapter's run or resume: its job in a file and the environment, its tools over
        MCP from this process, Stop as SIGINT to its process group (`exitkit.command`)."""
        path = setup.folder / f"job-{next(self._ids)}.json"
        logs = path.with_suffix("")
        stop_when = None if stop is None else _once_started(setup.ledger, *stop)
        with served_tools(setup) as tools, self.journal.window(guard=guard, run=setup.folder.name) as seen:
            job = job_file(setup, action, decision, tools.url)
            with created(path) as f:
                f.write(json.dumps(job).encode())
            env = self.env | environment(job, path)
            started = launch(argv, env, logs)
            tools.started(started.pid, marker := f"EXITKIT_JOB={env['EXITKIT_JOB']}")
            done = supervise(started, logs, timeout_s=self.timeout_s, stop_when=stop_when,
                             stop_signal=COMMAND_STOP, stop_group=True)
            kill_marked(marker)  # what it started outside its process group, detached
            left = tools.left_running()
        got = outcome_line(done.stdout)
        outcome = self._outcome(None if got is None else {"outcome": got}, done, action)
        # Timed from its first request: its start-up (an interpreter, `npx`) is its language's, not
        # its loop's; its exit is its own (Stop is timed to it).
        started = seen[0].started + time.monotonic() - time.time() if seen else done.started
        return _as_handed(Run(outcome=outcome, entries=seen, events=setup.ledger.events(),
                              started=started, ended=done.ended, stop_pressed=done.stop_pressed,
                              stop_wall=done.stop_wall, peak_rss_kib=done.peak_rss_kib, left_running=left,
                              returncode=-1 if done.returncode is None else done.returncode), setup)

    def _child_env(self) -> dict[str, str]:
        return self.env | {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

    def _server(self, spec: str) -> ForkServer | None:
        """The fork server for `spec`, started on first use; None where it cannot serve (then every
        run is a new interpreter). An adapter that does not load there is the kit's trouble."""
        if spec not in self.servers:
            argv = [sys.executable, "-m", "exitkit.child", "forks", spec]
            got = ForkServer.start(argv, self._child_env(), self.timeout_s)
            if isinstance(got, str):
                raise ChildLoadError(f"could not load the adapter in a new process: {got[-300:]}")
            self.servers[spec] = got
        return self.servers[spec]

    def close(self) -> None:
        for server in self.servers.values():
            if server is not None:
                server.close()
        self.servers.clear()

    def _outcome(self, got: dict[str, Any] | None, done: Exit, command: str) -> Outcome:
        if done.timed_out:
            late = f"no result within {self.timeout_s:g} s"
            self.timeouts.append(late if command == "run" else f"{command} in a new process: {late}")
            return Outcome(status="kit timeout", error=late)
        if got is None:
            rc = done.returncode
            # SIGKILL: the crash case's tool killed the process (a Python adapter's own, a command's group).
            why = "killed (SIGKILL)" if rc == -9 else f"exited {rc}: {excerpt(done.stderr, 600)}"
            return Outcome(status="process ended without a result", error=why)
        return Outcome(**got["outcome"])


def _once_started(ledger: Ledger, tool: str, after_s: float) -> Callable[[], bool]:
    """A test that says yes `after_s` seconds after the ledger first shows `tool` starting."""
    seen = len(ledger.events())
    start: list[float] = []

    def due() -> bool:
        if not start:
            start.extend(e.t for e in ledger.events()[seen:] if e.is_(tool))
        return bool(start) and time.time() >= start[0] + after_s

    return due


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
