"""`PostgresStore`: runs shared by processes on several machines (psycopg 3 and its pool).

The same tables and transactions as SQLite (`harness.store.sql`); what differs: a lease read
inside a save locks its row (`FOR UPDATE`), so a takeover waits for a save in flight and then
sees it; and lease times come from the database's clock, so hosts need not agree on the time.
A save that only appends (a read-only turn's) is one statement on a connection in autocommit, a
transaction of its own: one round trip, where BEGIN, the lease, the rows, the head and COMMIT
were five, and no transaction of it is ever open while this process could be paused.
Durability (`harness.store.durability`): `power-loss` sets `synchronous_commit=on` for every
session; `process-crash` keeps the server's setting, except for a save that opens an intent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from functools import cache

from harness.codec import dumps_data
from harness.state import RunState
from harness.store.durability import Durability, durability_of
from harness.store.errors import StoreError, TransactionExpired
from harness.store.masking import check_password, mask_url, passwords, scrub, scrub_exception
from harness.store.sql import (
    HEAD_CONFLICT,
    HEAD_INSERT,
    IDLE_FLOOR_SECONDS,
    SqlStore,
    Tx,
    fenced_error,
    head_params,
    renew,
)

# The pool logs what it already told us through an exception (a connection the server ended,
# one that failed to open); with no logging set up, Python would print those records raw on
# stderr beside the store's own one-line error. A program that sets up logging still gets them.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

SCHEMA_LOCK = int.from_bytes(b"harness", "big")
"""The advisory lock key under which a database's tables are created."""


@cache
def _pg(sql: str) -> str:
    return sql.replace("?", "%s")  # the store's statements carry no literal question marks


CLOCK = "EXTRACT(EPOCH FROM clock_timestamp())"
"""The database's clock in seconds: lease times never depend on the clocks of the hosts."""


ITEMS = "SELECT ?, r->>0, (r->>1)::integer, r->>2 FROM json_array_elements(?::json) AS r"
"""The item rows `_item_params` sends, as a query: its parameters are the run id and the document."""


def _item_params(rows: list[tuple[str, int, str]]) -> tuple:
    """A save's item rows as one parameter, a JSON document `[[field, seq, body], …]` written by
    the C encoder: as arrays, psycopg's dumpers walked every value in Python (and as text arrays
    escaped every quote of every body with a regular expression)."""
    return (dumps_data(rows),)


def _append_sql(lease: str) -> str:
    """A save that only appends, as one statement (`PostgresStore._append`): `lease` yields a row
    when this save may write, and the head and the item rows are written only then. The item
    rows are one INSERT whatever their number (one JSON document: `ITEMS`), so the text never
    changes and psycopg keeps it prepared on the server."""
    return _pg(
        f"WITH {lease}, "
        f"head AS ({HEAD_INSERT} AND EXISTS (SELECT FROM lease){HEAD_CONFLICT} RETURNING run_id), "
        f"items AS (INSERT INTO run_items (run_id, field, seq, body) {ITEMS} "
        "WHERE EXISTS (SELECT FROM head)) "
        "SELECT (SELECT count(*) FROM lease), (SELECT count(*) FROM head)")


_APPEND_CLAIMED = _append_sql(f"lease AS ({renew(CLOCK)} RETURNING epoch)")
"""Under this process's claim: the lease renewed, as `SqlStore._fence` renews it."""
_APPEND_UNCLAIMED = _append_sql(
    "locked AS (SELECT owner, until FROM leases WHERE run_id = ? FOR UPDATE), "
    "lease AS (SELECT WHERE NOT EXISTS "
    f"(SELECT FROM locked WHERE owner IS NOT NULL AND NOT until < {CLOCK}))")
"""Outside a claim: only while no lease is held (its row locked, as `SqlStore._fence` reads it, so
a claim in flight is waited for); a held one may be a process gone, which the full save tells."""


class _PgTx:
    def __init__(self, conn) -> None:
        self.conn = conn

    def execute(self, sql: str, params: tuple = ()) -> int:
        return self.conn.execute(_pg(sql), params).rowcount

    def executemany(self, sql: str, rows: list[tuple]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(_pg(sql), rows)

    def fetchall(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(_pg(sql), params).fetchall()

    clock = CLOCK

    def now(self) -> float:
        return float(self.conn.execute(f"SELECT {self.clock}").fetchone()[0])


class PostgresStore(SqlStore):
    """Runs in a PostgreSQL database named by a `postgresql://` URL."""

    for_update = " FOR UPDATE"

    def __init__(self, url: str, *, lease_seconds: float | None = None, max_connections: int = 4,
                 connect_seconds: float = 10.0, durability: Durability | None = None) -> None:
        super().__init__(lease_seconds=lease_seconds)
        self.durability = durability_of(durability)
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreError(
                "a postgresql:// store needs psycopg: pip install 'harness-lab[postgres]'"
            ) from None
        check_password(url)
        self._errors = psycopg.Error
        self.label = mask_url(url)
        self._secrets = passwords(url)
        _MASK.remember(self._secrets)
        try:
            # One direct connection first: an unreachable server is one clear error at once,
            # not a pool retrying until its timeout.
            psycopg.connect(url, connect_timeout=max(1, int(connect_seconds))).close()
            self._pool = ConnectionPool(url, min_size=1, max_size=max(2, max_connections), open=False,
                                        timeout=connect_seconds, configure=self._configure,
                                        kwargs={"connect_timeout": max(1, int(connect_seconds))})
            self._pool.open(wait=True, timeout=connect_seconds)
        except Exception as e:  # noqa: BLE001 - psycopg's and the pool's errors: one clear line
            raise StoreError(
                f"cannot reach {self.label} ({self._first_line(e)}); nothing was written"
            ) from None
        try:
            self._create_schema()
        except BaseException:
            self._pool.close()
            raise

    def _configure(self, conn) -> None:
        # A holder paused inside a save (SIGSTOP, a partition) keeps its transaction open and the
        # lease row locked while its connection lives; the server ends such a session once it
        # sits idle in a transaction for a lease (never under IDLE_FLOOR_SECONDS: a busy machine
        # may stall a live save that long), so the run can be taken over and the paused holder's
        # commit fails instead of landing.
        seconds = max(self.lease_seconds, IDLE_FLOOR_SECONDS)
        timeout = min(2**31 - 1, round(seconds * 1000))  # the server's range, in ms
        conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)", (str(timeout),))
        if self.durability == "power-loss":
            conn.execute("SET synchronous_commit = on")
        conn.commit()
        # A statement outside `transaction()` is a transaction of its own, without a BEGIN sent
        # first (psycopg sends it as a round trip of its own): what lets `_append` be one.
        conn.autocommit = True

    def _tables(self, tx: Tx) -> set[str]:
        return {r[0] for r in tx.fetchall(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}

    def _lock_schema(self, tx: Tx) -> None:
        # Concurrent `CREATE TABLE IF NOT EXISTS` of one name collide in the catalog (a unique
        # violation, not a wait): the first users of a fresh database take turns instead.
        tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))

    @contextlib.contextmanager
    def _transaction(self, *, write: bool = True, synced: bool = False) -> Iterator[Tx]:
        with self._mapped(), self._pool.connection() as conn, conn.transaction():
            if synced and self.durability != "power-loss":
                conn.execute("SET LOCAL synchronous_commit = on")
            yield _PgTx(conn)

    def _append(self, state: RunState) -> bool:
        """A save that only appends (the run followed, no intent open or closed, the cache only
        grown) as ONE statement, a transaction of its own: one round trip in all. No transaction
        stays open across a pause of this process, so none holds the run's rows."""
        rid, claim = state.run_id, self._claims.get(state.run_id)
        if (claim is not None and claim.stop.is_set()) or state.intents or not self._tracker.follows(state):
            return False
        delta = self._tracker.delta(state, follows=True)
        if delta.cache_rewrite or delta.started or delta.finished or delta.abandoned:
            return False
        sql, lease = ((_APPEND_UNCLAIMED, (rid,)) if claim is None
                      else (_APPEND_CLAIMED, (self.lease_seconds, rid, claim.owner, claim.epoch)))
        if self.checkpoint is not None:
            self.checkpoint("mid_save")  # the last instant at which nothing of this save is written
        with self._mapped(), self._pool.connection() as conn:
            free, written = conn.execute(
                sql, (*lease, *head_params(state, delta), rid, *_item_params(delta.rows()))).fetchone()
        if not free and claim is None:
            return False  # a lease is held: the full save decides whether its holder is gone
        if not free:
            with self._transaction(write=False) as tx:
                raise fenced_error(tx, rid, claim.epoch)
        if not written:
            with self._transaction(write=False) as tx:
                self._check_schema(tx)
            raise StoreError(f"{self.label} has no table layout version; nothing was written")
        return True

    @contextlib.contextmanager
    def _mapped(self) -> Iterator[None]:
        """psycopg's and the pool's errors as the store's, one line each, the password masked."""
        try:
            yield
        except self._errors as e:
            # 25P03: the server ended a session left idle inside a transaction past a lease.
            kind = TransactionExpired if getattr(e, "sqlstate", None) == "25P03" else StoreError
            raise kind(
                f"{self.label}: {self._first_line(e)}; this transaction was rolled back"
            ) from None
        except TimeoutError as e:  # the pool found no connection in time
            raise StoreError(f"{self.label}: {self._first_line(e)}; nothing was written") from None

    def close(self) -> None:
        self._pool.close()

    def _first_line(self, error: BaseException) -> str:
        """The driver's error as one line without a piece of the password, and the error itself
        (with what it chains) masked too, as it stays reachable from the store's own error."""
        scrub_exception(error, self._secrets)
        return (str(error).strip().splitlines() or [type(error).__name__])[0]


class _MaskPasswords(logging.Filter):
    """Masks every piece of the passwords of the stores this process opened in the driver's and
    the pool's log records (a failed reconnection logs the driver's error, password and all)."""

    known: tuple[str, ...] = ()

    def remember(self, secrets: tuple[str, ...]) -> None:
        self.known = tuple(sorted({*self.known, *secrets}, key=len, reverse=True))

    def filter(self, record: logging.LogRecord) -> bool:
        if self.known:
            record.msg, record.args = scrub(record.getMessage(), self.known), ()
            if record.exc_info:
                scrub_exception(record.exc_info[1], self.known)
                record.exc_text = None
        return True


_MASK = _MaskPasswords()
for _name in ("psycopg", "psycopg.pool", "psycopg.pq"):  # a filter sees only its own logger's records
    logging.getLogger(_name).addFilter(_MASK)
