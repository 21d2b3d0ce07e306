"""Who holds a SQLite database's write lock: the error a writer gives after waiting its limit
names that process, what it is doing, the runs it holds, and how to get the database back.

In WAL mode SQLite takes its write lock as a POSIX lock on one byte of the `-shm` file
(offset 120, `WAL_WRITE_LOCK`), so `F_GETLK` there says which process holds it. A stopped
process keeps that lock for as long as it lives: nothing on the database side can end its
transaction (PostgreSQL can, and does after a lease).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import struct
from pathlib import Path

from harness.store.masking import mask_command

WAL_WRITE_LOCK = 120
_FLOCK = "hhqqi"
"""Linux's `struct flock`: type, whence, start, length, pid."""


def write_lock_holder(database: Path) -> int | None:
    """The pid holding `database`'s WAL write lock, or None (free, not WAL, not readable here)."""
    try:
        fd = os.open(f"{database}-shm", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        query = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, WAL_WRITE_LOCK, 1, 0)
        kind, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, query))
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)
    return pid if kind != fcntl.F_UNLCK and pid > 0 else None


def _process(pid: int) -> str:
    """` (stopped …), running `command`` as /proc tells it; empty where it does not."""
    state = command = ""
    with contextlib.suppress(OSError, IndexError):
        code = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()[0]
        state = {b"T": " (stopped: SIGSTOP, or paused in a debugger)",
                 b"t": " (paused in a debugger)"}.get(code, "")
    with contextlib.suppress(OSError):
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        shown = mask_command([w for w in words if w])
        command = f", running `{shown[:160]}{'…' if len(shown) > 160 else ''}`"
    return state + command


def held_runs(leases: list[tuple[object, object]], pid: int) -> list[str]:
    """The run ids whose lease rows (run_id, holder JSON) name `pid` of this host as holder."""
    runs, here = [], socket.gethostname()
    for run_id, raw in leases:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            holder = json.loads(raw)  # a pid means this process only on this host
            if holder.get("pid") == pid and holder.get("host") == here:
                runs.append(str(run_id))
    return runs


def stuck_message(database: Path, pid: int | None, runs: list[str], waited: float) -> str:
    """The error for a writer that waited `waited` seconds for the write lock of `database`."""
    shown = ", ".join(runs[:10]) + (", …" if len(runs) > 10 else "")
    if pid is None:
        who = "another process"
        recover = (f"find the process that has {database} open (fuser, lsof): let it finish, or end it "
                   "(SQLite rolls its unfinished save back, and its runs are taken over at once)")
    else:
        who = f"process {pid}{_process(pid)}" + (f", which holds run {shown}," if runs else "")
        recover = (f"`kill -CONT {pid}` lets a stopped process finish its save; `kill {pid}` ends it "
                   "(SQLite rolls its unfinished save back, and its runs are taken over at once)")
    return (f"{database}: {who} has held the database's write lock for over {waited:g} s; every "
            f"writer waits for it, and nothing was written. To recover: {recover}. Runs whose "
            "processes may pause, or that several hosts share, belong in PostgreSQL, which cuts a "
            "paused holder off after its lease (docs/harness.md)")
