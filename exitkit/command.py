"""Command adapters: an agent in any language, started as a command line (`--command CMD`).

The kit runs the command in a new process group for every run, with the run's job in
environment variables and a JSON job file (`job_file`, `environment`); asked to `describe`
itself, the command prints one JSON line with its name and the limits its framework has. The
run's tools reach it only over MCP: the kit serves them (`served_tools`) on a loopback port, on
a thread of the kit's own process, for as long as the run's process lives, with the same tool
code and the same ledger as for a Python adapter. Stop is SIGINT to the process group; in the
crash case the kit's `delete_file` deletes, then SIGKILLs the group; the outcome is the last
JSON line on standard output with a string `status` (`outcome_line`). The contract in full, for
the authors of such agents: docs/exitkit.md, "Any language: command adapters".
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exitkit.child import SETTLE_S
from exitkit.contract import Decision, Declared, Tool, decision_to_json
from exitkit.journal import PRICE_IN_PER_M, PRICE_OUT_PER_M
from exitkit.ledger import Ledger
from exitkit.loader import AdapterError, check_limits
from exitkit.mcp import served
from exitkit.process import excerpt, kill_marked, launch, supervise
from exitkit.report import printable
from exitkit.setup import Setup
from exitkit.tools import SYSTEM, TASKS

STOP_SIGNAL = signal.SIGINT
"""Stop, sent to the command's whole process group."""
DESCRIBE_TIMEOUT_S = 60.0
"""How long a command may take to print its description (a cold `npx` fetches its packages)."""
API_KEY = "exitkit-unused"
NAME_CHARS = 200


def argv_of(line: str) -> list[str]:
    """`line` split as a shell splits words, without a shell (no pipes, no expansion)."""
    try:
        argv = shlex.split(line)
    except ValueError as e:
        raise AdapterError(f"command {line!r} does not split into words: {e}") from None
    if not argv:
        raise AdapterError("an empty --command")
    return argv


def _tail(text: str, limit: int = 300) -> str:
    return printable(text.strip()[-limit:]) or "(nothing)"


def _ends(stderr: str) -> str:
    return printable(excerpt(stderr, 600)) or "(nothing)"


def describe(line: str, env: Mapping[str, str]) -> Declared:
    """The command's name and limits, from the one JSON line it prints for `describe`; a command
    that cannot start or prints no such line is a usage error (`AdapterError`), one line long."""
    argv = argv_of(line)
    with tempfile.TemporaryDirectory(prefix="exitkit-describe-") as tmp:
        logs = Path(tmp) / "describe"
        try:
            # None of a job's variables the kit itself may have inherited: `describe` has no job.
            clean = {k: v for k, v in env.items() if k not in VARIABLES}
            started = launch(argv, clean | {"EXITKIT_ACTION": "describe"}, logs)
        except OSError as e:  # not found, not executable, not a program
            raise AdapterError(f"cannot start command {line!r}: {e.strerror or e}") from None
        done = supervise(started, logs, timeout_s=DESCRIBE_TIMEOUT_S)
    said = f"command {line!r} with EXITKIT_ACTION=describe"
    if done.timed_out:
        raise AdapterError(f"{said} printed no description within {DESCRIBE_TIMEOUT_S:g} s")
    if done.returncode != 0:
        raise AdapterError(f"{said} exited {done.returncode}; its stderr: {_ends(done.stderr)}")
    data = _last_object(done.stdout, lambda d: "limits" in d)
    if data is None:
        example = json.dumps({"name": "my agent", "limits": ["max_turns", "cancel"]})
        raise AdapterError(f"{said} printed no JSON line with `limits` (e.g. {example}); its stdout "
                           f"ends: {_tail(done.stdout)}")
    check_limits(line, data["limits"])
    name = data.get("name", line)
    if not isinstance(name, str) or not name.strip():
        raise AdapterError(f"{said} printed a `name` that is not a non-empty string: {_tail(repr(name))}")
    return Declared(spec=line, name=name[:NAME_CHARS], limits=frozenset(data["limits"]))


def _last_object(stdout: str, wanted: Any) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict) and wanted(data):
            return data
    return None


def outcome_line(stdout: str) -> dict[str, Any] | None:
    """The outcome the command printed, as an `Outcome`'s fields: its last stdout line that is a
    JSON object with a string `status`; fields of the wrong type are left out."""
    data = _last_object(stdout, lambda d: isinstance(d.get("status"), str))
    if data is None:
        return None
    n = data.get("transcript_messages")
    return {"status": data["status"],
            **{k: data[k] for k in ("answer", "error") if isinstance(data.get(k), str)},
            "transcript_messages": n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None}


def job_file(setup: Setup, action: str, decision: Decision | None, mcp_url: str) -> dict[str, Any]:
    """The job as the command reads it (docs/exitkit.md has the table)."""
    limits = setup.limits
    return {
        "action": action, "decision": decision_to_json(decision),
        "base_url": setup.base_url, "api_key": API_KEY, "model": setup.scenario,
        "task": TASKS[setup.scenario], "system": SYSTEM, "mcp_url": mcp_url,
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters,
                   "read_only": t.read_only} for t in setup.toolbox().tools()],
        "limits": {"max_turns": limits.max_turns, "max_budget_usd": limits.max_budget_usd,
                   "needs_approval": sorted(limits.needs_approval)},
        "state_dir": str(setup.folder / "state"),
        "prices": {"input_usd_per_m": PRICE_IN_PER_M, "output_usd_per_m": PRICE_OUT_PER_M},
        "stop_signal": STOP_SIGNAL.name,
    }


def environment(job: Mapping[str, Any], path: Path) -> dict[str, str]:
    """The variables the kit sets for a run or resume of the command (`VARIABLES`)."""
    return {"EXITKIT_ACTION": job["action"], "EXITKIT_JOB": str(path),
            "EXITKIT_DECISION": json.dumps(job["decision"]), "OPENAI_BASE_URL": job["base_url"],
            "OPENAI_API_KEY": job["api_key"], "EXITKIT_MCP_URL": job["mcp_url"],
            "EXITKIT_STATE_DIR": job["state_dir"]}


VARIABLES = ("EXITKIT_ACTION", "EXITKIT_JOB", "EXITKIT_DECISION", "OPENAI_BASE_URL", "OPENAI_API_KEY",
             "EXITKIT_MCP_URL", "EXITKIT_STATE_DIR")


@dataclass(frozen=True)
class _UntilClosed(Ledger):
    """The run's ledger while its process lives: the kit stops the tools' server when the process
    has ended, and a tool the run left running must not read as cancelled by the agent then (in a
    Python adapter's process it would simply die with the process)."""

    closed: threading.Event = field(default_factory=threading.Event)

    def note(self, tool: str, event: str, args: dict[str, Any], detail: str = "") -> None:
        if not self.closed.is_set():
            super().note(tool, event, args, detail)


@dataclass
class Served:
    """One run's tools as the kit serves them to its command."""

    url: str = ""
    pid: int = 0
    """The command's process group, once started: the crash case kills it."""
    known: threading.Event = field(default_factory=threading.Event)
    running: int = 0
    """Tool calls under way on the server."""

    marker: str = ""
    """A variable only this run's processes have (`EXITKIT_JOB=...`): finds those it detached."""

    def started(self, pid: int, marker: str) -> None:
        self.pid, self.marker = pid, marker
        self.known.set()

    def kill(self) -> None:
        # Only the command calls its tools, and it runs only once started: the wait is for the
        # moment between its start and `started`.
        if self.known.wait(5.0):
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # it had ended already
                pass
            kill_marked(self.marker)

    def counted(self, tool: Tool) -> Tool:
        async def call(**arguments: Any) -> str:
            self.running += 1
            try:
                return await tool.call(**arguments)
            finally:
                self.running -= 1

        return replace(tool, call=call)

    def left_running(self) -> int:
        """The calls still under way `SETTLE_S` after the process ended (a cancellation its client
        sent just before may still be on its way): what the run left running, as for Python."""
        end = time.monotonic() + SETTLE_S
        while self.running and time.monotonic() < end:
            time.sleep(0.01)
        return self.running


class _ToFile(logging.Filter):
    """Log records of the tools' server threads, written to the run's `tools.log` instead of the
    kit's standard error: a command that dies mid-call makes the MCP SDK and uvicorn log tracebacks,
    which are its run's, not the card's."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path, self.threads, self.handlers = path, set[int | None](), list[logging.Handler]()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread not in self.threads:
            return True
        try:  # not through a symlink the command put in the log's place
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError:
            return False
        with os.fdopen(fd, "a") as log:
            log.write(logging.Formatter().format(record) + "\n")
        return False

    def attach(self, handlers: list[logging.Handler | None]) -> None:
        for handler in handlers:
            if handler is not None and handler not in self.handlers:
                handler.addFilter(self)
                self.handlers.append(handler)

    def detach(self) -> None:
        for handler in self.handlers:
            handler.removeFilter(self)


@contextmanager
def served_tools(setup: Setup) -> Iterator[Served]:
    """The run's tools over MCP on 127.0.0.1, from a thread of the kit. Leaving the block closes
    the ledger to them, then stops the server."""
    run, ledger = Served(), _UntilClosed(setup.ledger.path)
    routed, before = _ToFile(setup.folder / "tools.log"), {t.ident for t in threading.enumerate()}
    # Where the SDK's records end (no handler: the last resort, or the root's where it has some).
    routed.attach([logging.lastResort, *logging.getLogger().handlers])
    try:
        tools = setup.toolbox(ledger=ledger, crash=run.kill).tools()
        # The ledger too: how each call arrived and what carried Stop to it, as for a Python adapter's.
        with served(tuple(run.counted(t) for t in tools), ledger) as url:
            run.url = url
            routed.threads |= {t.ident for t in threading.enumerate()} - before
            # uvicorn's own handlers, replaced by every server it configures: this run's are now in place.
            routed.attach(logging.getLogger("uvicorn").handlers)
            try:
                yield run
            finally:
                ledger.closed.set()
    finally:
        ledger.closed.set()
        routed.detach()
