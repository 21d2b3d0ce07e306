"""An agent's process, as the kit runs every run: started in a session of its own, its output
into files, Stop delivered as a signal, and everything it started killed when it ends.

The kit never runs an agent in its own process. An agent there could hand the kit's standard
output to a helper process that outlives it (so the kit's caller waits for it), or block the
event loop with every signal ignored (so no timeout could fire). A process of its own is one
the kit can always end: at its timeout it is killed with its whole process group, and when it
exits whatever it left running in that group is killed too, so nothing a finished run started
can hold the kit's pipes or talk to the provider in a later run.

A run's process is either a new interpreter (`launch`) or a fresh fork of a server that has
imported the adapter once (`exitkit.forks`, `fork`); either way the kit supervises it alike.
This is also the seam for any agent the kit can start: a command line in another language is a
`launch` of its own argv (the same job file, the same Stop signal, the same last JSON line).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from exitkit.forks import ForkServer

POLL_S = 0.01
"""How often the kit looks whether it is time to press Stop, while it waits for the process."""
TAIL_BYTES = 1_000_000
"""How much of the end of standard output and error the kit reads: the result is the last line."""
REAP_S = 10.0
"""How long the kit waits for a process it killed to be reaped."""


@dataclass(frozen=True, kw_only=True)
class Launched:
    pid: int
    """Also its process group: every run's process leads a session of its own."""
    wait: Callable[[float], int | None]
    """The exit status within that many seconds, or None."""
    started: float
    peak_rss_kib: Callable[[], int] = lambda: 0
    """Once it has ended: its peak resident set size, the children it waited for included (0: unknown)."""


@dataclass(frozen=True, kw_only=True)
class Exit:
    """How a process ended, as the kit saw it."""

    returncode: int | None
    """The exit status (-9 when it was SIGKILLed); None when the kit killed it at its timeout."""
    stdout: str
    stderr: str
    started: float
    ended: float
    """`time.monotonic()` at the start and the end of the process (system-wide on Linux and macOS,
    so comparable with what the process itself reports)."""
    stop_pressed: float | None = None
    stop_wall: float | None = None
    """`time.monotonic()` and `time.time()` when Stop was signalled, if it was."""
    peak_rss_kib: int = 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def created(path: Path) -> BinaryIO:
    """`path` as a new file, open for writing. An earlier run may have left a symlink at that name
    in its folder, to a file of the user's: it is removed, never written through."""
    path.unlink(missing_ok=True)
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb")


def launch(argv: list[str], env: dict[str, str], logs: Path) -> Launched:
    """`argv` as a new process; its output goes to `logs`.out and `.err`."""
    # Files, not pipes: a process that inherits them can hold nothing the kit waits on. No stdin:
    # an agent that prompts on the terminal gets end-of-file, not the user's keys.
    with created(logs.with_suffix(".out")) as stdout, created(logs.with_suffix(".err")) as stderr:
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                                start_new_session=True)

    reaped = _Reaped(proc)
    return Launched(pid=proc.pid, wait=reaped.wait, started=started, peak_rss_kib=lambda: reaped.peak)


class _Reaped:
    """A process's exit status and, from `wait4`, its peak RSS (what a command agent cannot report
    itself); waited for with a timeout on a pidfd where the system has them."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.peak = proc, 0
        try:
            self.fd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # not Linux 5.3+: the exit status only
            self.fd = None

    def wait(self, seconds: float) -> int | None:
        if self.proc.returncode is not None:
            return self.proc.returncode
        if self.fd is None:
            try:
                return self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return None
        if not select.select([self.fd], [], [], seconds)[0]:
            return None
        _, status, usage = os.wait4(self.proc.pid, 0)
        os.close(self.fd)
        self.proc.returncode, self.peak = os.waitstatus_to_exitcode(status), usage.ru_maxrss
        return self.proc.returncode


def fork(server: ForkServer, argv: list[str], env: dict[str, str], logs: Path) -> Launched:
    """`python -m exitkit.child ARGV...` as a fresh fork of `server`."""
    started = time.monotonic()
    pid = server.fork(argv, env, str(logs.with_suffix(".out")), str(logs.with_suffix(".err")))
    return Launched(pid=pid, wait=lambda seconds: server.wait(pid, seconds), started=started)


def excerpt(text: str, limit: int) -> str:
    """`text` stripped, or its start and its end when it is longer than `limit`: Python prints an
    uncaught error's message after its traceback, Node (and Go, Java, Rust) before its stack."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head].rstrip()} … {text[head - limit:].lstrip()}"


def _tail(path: Path) -> str:
    if not path.exists():
        return ""
    with path.open("rb") as f:
        f.seek(max(path.stat().st_size - TAIL_BYTES, 0))
        return f.read().decode("utf-8", errors="replace")


def kill_marked(marker: str) -> None:
    """SIGKILL every process whose environment holds `marker` (a variable one run's processes alone
    have): what a run started in a session of its own is out of its process group, not out of reach.
    Nothing where the system has no /proc."""
    wanted = marker.encode()
    try:
        pids = [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if pid != os.getpid() and wanted in environ.read().split(b"\0"):
                    os.kill(pid, signal.SIGKILL)
        except OSError:  # gone, or not ours to read
            continue


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # nothing left in it
        pass


def supervise(run: Launched, logs: Path, *, timeout_s: float, stop_when: Callable[[], bool] | None = None,
              stop_signal: int = signal.SIGUSR1, stop_group: bool = False) -> Exit:
    """Wait for `run` to end or reach its timeout; `stop_when()` is asked every `POLL_S` and, the
    first time it says so, `stop_signal` is sent to the process (with `stop_group`, to its whole
    process group: a command's wrapper and what it started)."""
    pressed: tuple[float, float] | None = None
    returncode: int | None = None
    try:
        while returncode is None:
            left = run.started + timeout_s - time.monotonic()
            if left <= 0:
                break
            waiting = stop_when is not None and pressed is None
            returncode = run.wait(min(POLL_S, left) if waiting else left)
            if returncode is None and waiting and stop_when():
                pressed = time.monotonic(), time.time()
                try:
                    (os.killpg if stop_group else os.kill)(run.pid, stop_signal)
                except ProcessLookupError:  # it ended in between: the wait below reads its status
                    pass
        ended = time.monotonic()
    finally:
        _kill_group(run.pid)
        if returncode is None:
            run.wait(REAP_S)
    return Exit(returncode=returncode, stdout=_tail(logs.with_suffix(".out")),
                stderr=_tail(logs.with_suffix(".err")), started=run.started, ended=ended,
                stop_pressed=pressed[0] if pressed else None, stop_wall=pressed[1] if pressed else None,
                peak_rss_kib=run.peak_rss_kib())
