"""An agent's process, as the kit runs every run: started in a session of its own, its output
into files, Stop delivered as a signal, and everything it started killed when it ends.

The kit never runs an agent in its own process. An agent there could hand the kit's standard
output to a helper process that outlives it (so the kit's caller waits for it), or block the
event loop with every signal ignored (so no timeout could fire). A process of its own is one
the kit can always end: at its timeout it is killed with its whole process group, and when it
exits whatever it left running in that group is killed too, so nothing a finished run started
can hold the kit's pipes or talk to the provider in a later run.

This is the seam for any agent the kit can start: `python -m exitkit.child` for a Python
adapter today, any other command line tomorrow (the same job file, the same Stop signal, the
same last JSON line on standard output).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.01
"""How often the kit looks whether it is time to press Stop, while it waits for the process."""
TAIL_BYTES = 1_000_000
"""How much of the end of standard output and error the kit reads: the result is the last line."""


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

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def _tail(path: Path) -> str:
    with path.open("rb") as f:
        f.seek(max(path.stat().st_size - TAIL_BYTES, 0))
        return f.read().decode("utf-8", errors="replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # nothing left in it
        pass


def run_process(argv: list[str], *, env: dict[str, str], logs: Path, timeout_s: float,
                stop_when: Callable[[], bool] | None = None, stop_signal: int = signal.SIGUSR1) -> Exit:
    """Run `argv` to its end or its timeout; `stop_when()` is asked every `POLL_S` and, the first
    time it says so, `stop_signal` is sent to the process. `logs` is the stem of the `.out` and
    `.err` files its output goes to."""
    out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
    # Files, not pipes: a process that inherits them can hold nothing the kit waits on. No stdin:
    # an agent that prompts on the terminal gets end-of-file, not the user's keys.
    with out.open("wb") as stdout, err.open("wb") as stderr:
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env,
                                start_new_session=True)
    pressed: tuple[float, float] | None = None
    returncode: int | None = None
    try:
        while returncode is None:
            left = started + timeout_s - time.monotonic()
            if left <= 0:
                break
            waiting = stop_when is not None and pressed is None
            try:
                returncode = proc.wait(timeout=min(POLL_S, left) if waiting else left)
            except subprocess.TimeoutExpired:
                if waiting and stop_when():
                    pressed = time.monotonic(), time.time()
                    proc.send_signal(stop_signal)
        ended = time.monotonic()
    finally:
        _kill_group(proc.pid)
        proc.wait()
    return Exit(returncode=returncode, stdout=_tail(out), stderr=_tail(err), started=started, ended=ended,
                stop_pressed=pressed[0] if pressed else None, stop_wall=pressed[1] if pressed else None)
