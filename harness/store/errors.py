"""What a store refuses, and why: errors that carry values a person can act on."""

from __future__ import annotations

import math
import time


class StoreError(ValueError):
    """The store cannot be used as given: a malformed URL, an unreachable database, a schema
    of a newer version, a path that is not a regular file. Nothing was written."""


class StoreBusy(StoreError):
    """Another process has held the database's write lock longer than a writer waits (a process
    stopped inside a save): the message names it and says how to recover. Nothing was written."""


def when(since: object) -> str:
    """A lease's start as UTC text; anything odd in the row (`1e300`, NaN, a string) is unknown."""
    if isinstance(since, bool) or not isinstance(since, int | float) or not math.isfinite(since):
        return "an unknown time"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))
    except (OverflowError, OSError, ValueError):
        return "an unknown time"


class RunOwned(Exception):
    """Another live process holds the run's lease; carries who, since when, and what to do."""

    def __init__(self, run_id: str, holder: dict[str, object]) -> None:
        self.run_id, self.holder = run_id, holder
        pid, host = holder.get("pid", "?"), holder.get("host")
        command = holder.get("command")
        what = f" ({command})" if isinstance(command, str) and command else ""
        where = f" on {host}" if isinstance(host, str) and host else ""
        super().__init__(
            f"run {run_id} is owned by process {pid}{where}{what} since {when(holder.get('since'))}; "
            "wait for it to stop, then retry (if that process is gone, its lease expires and a "
            "retry recovers the run)"
        )


class TransactionExpired(StoreError):
    """The database ended a transaction that sat idle past a lease: its process was paused
    inside it (SIGSTOP, a partition). Nothing of it was written."""


class Fenced(Exception):
    """This process's lease on a run was taken over, or ran out while it was paused inside a
    save: every write it attempts from now on is refused, and none was applied."""

    def __init__(self, run_id: str, epoch: int, now: int | None, *, paused: bool = False) -> None:
        self.run_id, self.epoch, self.now = run_id, epoch, now
        if paused:
            then = f"(the run now belongs to epoch {now})" if now is not None else "(nothing of it landed)"
            why = f"it was paused inside a save past its lease, and the database ended that save {then}"
        else:
            by = f"epoch {now}" if now is not None else "no one (the lease was released)"
            why = f"the lease expired and the run now belongs to {by}"
        super().__init__(
            f"run {run_id}: this process held it at epoch {epoch}, but {why}; this write was refused "
            "(fenced) and nothing more will be written by this process"
        )


class LedgerConflict(Exception):
    """A tool call was about to start while the ledger shows it already started (unfinished, by
    another writer) or done (the run was restored from an older copy)."""

    def __init__(self, run_id: str, call_id: str, *, done: bool = False) -> None:
        self.run_id, self.call_id, self.done = run_id, call_id, done
        what = ("done in the tool ledger, which is newer than this copy of the run (restored from a "
                "backup?)" if done else "started in the tool ledger by another writer")
        super().__init__(
            f"call {call_id!r} of run {run_id} is already {what}; it was not started a second time"
        )
