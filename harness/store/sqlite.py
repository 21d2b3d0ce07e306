"""`SQLiteStore`: the embedded default (stdlib `sqlite3`, WAL), one database file per state folder.

A save is one `BEGIN IMMEDIATE` transaction, so writers on this machine queue for a moment
instead of interleaving, and WAL lets readers (`harness list`, `show`) read meanwhile: opening
a database already set up takes no write lock either. A writer waits for the write lock a lease
(at least `IDLE_FLOOR_SECONDS`); a process stopped inside a save holds it for as long as it
lives, so the writer then stops with `StoreBusy`, naming that process and how to recover
(`harness.store.stuck`). A file holding another application's tables is refused untouched. What a
commit survives is the store's `durability` (`harness.store.durability`): `synchronous=NORMAL`
for `process-crash`, `FULL` for `power-loss` and for every save that opens an intent. The
database file and its `-wal`/`-shm` companions must be regular files: a FIFO, a device or a
symlink in their place is refused before anything opens it (opening a FIFO would block).
`MemoryStore` is the same store on a private in-memory database: tests and embedding get the
same promises with nothing on disk.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness.store.durability import Durability, durability_of
from harness.store.errors import StoreBusy, StoreError
from harness.store.sql import IDLE_FLOOR_SECONDS, SqlStore, Tx
from harness.store.stuck import held_runs, stuck_message, write_lock_holder

DEFAULT_FILE = "harness.db"
"""The database's name inside a state folder."""
CLOCK = "harness_now"
"""This process's clock as an SQL function of its connections (`_SqliteTx.clock`)."""
_LEVEL = {False: "NORMAL", True: "FULL"}
"""`PRAGMA synchronous` for a commit that need not / must reach the disk before it returns."""


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple = ()) -> int:
        return self.conn.execute(sql, params).rowcount

    def executemany(self, sql: str, rows: list[tuple]) -> None:
        self.conn.executemany(sql, rows)

    def fetchall(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()

    def now(self) -> float:
        return time.time()  # one machine: its clock is the database's

    clock = CLOCK + "()"


class SQLiteStore(SqlStore):
    """Runs in one SQLite database file (created with its folder on first use)."""

    def __init__(self, path: str | os.PathLike[str], *, lease_seconds: float | None = None,
                 busy_seconds: float | None = None, durability: Durability | None = None) -> None:
        super().__init__(lease_seconds=lease_seconds)
        self.durability = durability_of(durability)
        self.path = Path(path)
        self.label = str(self.path)
        self._lock = threading.RLock()  # the heartbeat thread shares the connection
        self.busy_seconds = busy_seconds or max(self.lease_seconds, IDLE_FLOOR_SECONDS)
        self._conn = self._connect(self.busy_seconds)
        try:
            self._create_schema()
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def in_folder(cls, directory: str | os.PathLike[str], **kwargs) -> SQLiteStore:
        """The store the CLI uses for a state folder: `<directory>/harness.db`."""
        return cls(Path(directory) / DEFAULT_FILE, **kwargs)

    def _connect(self, busy_seconds: float) -> sqlite3.Connection:
        folder = self.path.parent
        if folder.is_symlink():
            raise StoreError(f"{folder} is a symlink; the harness writes only into real folders")
        folder.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            _regular_or_absent(Path(f"{self.path}{suffix}"))
        conn = None
        try:
            conn = sqlite3.connect(self.path, timeout=busy_seconds, isolation_level=None,
                                   check_same_thread=False)
            _refuse_foreign(conn, self.path)  # before WAL mode, which would rewrite its header
            conn.create_function(CLOCK, 0, time.time)
            conn.execute("PRAGMA journal_mode=WAL")
            self._synced = self.durability == "power-loss"
            conn.execute(f"PRAGMA synchronous={_LEVEL[self._synced]}")
        except (sqlite3.DatabaseError, StoreError) as e:
            if conn is not None:
                conn.close()
            if isinstance(e, StoreError):
                raise
            if not all(os.access(p, os.W_OK) for p in (folder, self.path) if p.exists()):
                # WAL needs its -shm and -wal files beside the database, even to read it.
                raise StoreError(f"{self.path} is read-only (the file or its folder); the harness "
                                 "needs to write beside it, even to read; nothing was written") from None
            raise StoreError(
                f"{self.path} is not a usable SQLite database ({e}); nothing was written"
            ) from None
        return conn

    @contextlib.contextmanager
    def _transaction(self, *, write: bool = True, synced: bool = False) -> Iterator[Tx]:
        with self._lock:
            # The level in force at COMMIT decides; it can change only between transactions.
            want = synced or self.durability == "power-loss"
            if want != self._synced:
                self._conn.execute(f"PRAGMA synchronous={_LEVEL[want]}")
                self._synced = want
            try:
                # A writer takes the write lock up front (no upgrade deadlock); WAL lets readers
                # read beside it.
                self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.DatabaseError as e:
                if write and getattr(e, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY:
                    raise self._stuck() from None
                raise StoreError(
                    f"{self.path}: cannot start a transaction ({e}); nothing was written"
                ) from None
            try:
                yield _SqliteTx(self._conn)
                self._conn.execute("COMMIT")
            except BaseException as e:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise StoreError(
                        f"{self.path}: {e}; this save was rolled back, nothing of it written"
                    ) from None
                raise

    def _stuck(self) -> StoreBusy:
        """The error for a writer that waited its limit: who holds the lock, and how to recover."""
        pid, runs = write_lock_holder(self.path), []
        if pid is not None:
            with contextlib.suppress(sqlite3.Error):  # a read: WAL serves it beside the writer
                self._conn.execute("BEGIN")
                try:
                    runs = held_runs(self._conn.execute("SELECT run_id, holder FROM leases").fetchall(), pid)
                finally:
                    self._conn.execute("COMMIT")
        return StoreBusy(stuck_message(self.path, pid, runs, self.busy_seconds))

    def _tables(self, tx: Tx) -> set[str]:
        return {r[0] for r in tx.fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a database holding tables and none of ours: another application's file, where
    creating tables (or a `runs` of the same name) would corrupt what it keeps."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")]
    if names and "harness_schema" not in names:
        shown = ", ".join(repr(n[:40]) for n in names[:8]) + (", …" if len(names) > 8 else "")
        raise StoreError(
            f"{path} is another application's SQLite database (its tables: {shown}); the harness keeps "
            "runs only in an empty database or its own, so nothing was created or changed in it: "
            "name a new file (sqlite:///path/harness.db)"
        )


def _regular_or_absent(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
        raise StoreError(f"{path} is {kind}; a run database must be a regular file; nothing was opened")


class MemoryStore(SQLiteStore):
    """The same store on a private in-memory database: every load is a real round trip."""

    def __init__(self, *, lease_seconds: float | None = None) -> None:
        SqlStore.__init__(self, lease_seconds=lease_seconds)
        self.path = Path(":memory:")
        self.label = "memory"
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._conn.create_function(CLOCK, 0, time.time)
        self.durability, self._synced = "process-crash", False  # nothing reaches a disk either way
        self._create_schema()
