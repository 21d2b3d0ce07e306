"""Where runs are kept: a store is chosen by one URL, and every store keeps the same promises.

- `SQLiteStore(path)` — the embedded default (`state/harness.db`): stdlib `sqlite3`, WAL.
- `PostgresStore(url)` — runs shared by processes on several machines (psycopg 3, a pool).
- `MemoryStore()` — the same store in memory, for tests and embedding.
- `open_store(url)` — `sqlite:///path/harness.db` or `postgresql://user@host/db`.

What a commit survives is the store's `durability` (`harness.store.durability`): a killed
process (`process-crash`, the default) or a power cut too (`power-loss`); a save that opens a
write-ahead intent survives a power cut either way.

The promises (`harness.store.sql`): a save is one transaction that writes what the turn added;
one writer per run through a lease with a fencing epoch (`claim`, `Fenced`, `RunOwned`); a
tool ledger, `UNIQUE(run_id, tool_call_id)`, written with the run; a saved run that is
damaged, foreign, too deep or of a newer layout is a `StateFileError`/`StoreError` and is
left untouched.

Threat model: the store is trusted storage. Whoever can write the database (or the folder
holding the SQLite file) can do anything a run can: rewrite transcripts, approvals, the
ledger, the sandbox path a run names. The approval digest binds an approval to a call's
arguments against mistakes (a changed call needs a new decision), not against such a writer.
What the store does defend against is accident and hostile *content*: rows edited by hand,
nesting deeper than `harness.codec.MAX_DEPTH`, FIFOs or symlinks where the database file
should be, another application's SQLite file, lease rows with nonsense times, and credentials in
URLs (no piece of a password in any message; a command line, though, is visible to every local
user, so a password belongs in `HARNESS_STORE` or `~/.pgpass`).
SQLite leaves no temp files of ours: a save killed mid-way is rolled back by SQLite itself.
"""

from __future__ import annotations

from typing import Protocol

from harness.state import RunState
from harness.store.errors import Fenced, LedgerConflict, RunOwned, StoreBusy, StoreError
from harness.store.masking import mask_url
from harness.store.sql import DEFAULT_LEASE_SECONDS, RunSummary, SqlStore
from harness.store.sqlite import DEFAULT_FILE, MemoryStore, SQLiteStore
from harness.store.url import open_store


class Store(Protocol):
    """What the loop needs: save a run (what changed) and load one back."""

    def save(self, state: RunState) -> None: ...
    def load(self, run_id: str) -> RunState: ...


def __getattr__(name: str):
    if name == "PostgresStore":  # imported on use: psycopg is an optional dependency
        from harness.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)


__all__ = ["DEFAULT_FILE", "DEFAULT_LEASE_SECONDS", "Fenced", "LedgerConflict", "MemoryStore", "RunOwned",
           "RunSummary", "SQLiteStore", "SqlStore", "Store", "StoreBusy", "StoreError", "mask_url",
           "open_store"]
