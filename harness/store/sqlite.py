"""`SQLiteStore`: the embedded default (stdlib `sqlite3`, WAL), one database file per state folder.

A save is one `BEGIN IMMEDIATE` transaction, so writers on this machine queue for a moment
instead of interleaving, and WAL lets readers (`harness list`, `show`) read meanwhile. What a
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
from harness.store.errors import StoreError
from harness.store.sql import SqlStore, Tx

DEFAULT_FILE = "harness.db"
"""The database's name inside a state folder."""
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


class SQLiteStore(SqlStore):
    """Runs in one SQLite database file (created with its folder on first use)."""

    def __init__(self, path: str | os.PathLike[str], *, lease_seconds: float | None = None,
                 busy_seconds: float = 30.0, durability: Durability | None = None) -> None:
        super().__init__(lease_seconds=lease_seconds)
        self.durability = durability_of(durability)
        self.path = Path(path)
        self.label = str(self.path)
        self._lock = threading.RLock()  # the heartbeat thread shares the connection
        self._conn = self._connect(busy_seconds)
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
            conn.execute("PRAGMA journal_mode=WAL")
            self._synced = self.durability == "power-loss"
            conn.execute(f"PRAGMA synchronous={_LEVEL[self._synced]}")
        except sqlite3.DatabaseError as e:
            if conn is not None:
                conn.close()
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

    def close(self) -> None:
        with self._lock:
            self._conn.close()


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
        self.durability, self._synced = "process-crash", False  # nothing reaches a disk either way
        self._create_schema()
