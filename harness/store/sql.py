"""The database store, once for every SQL engine: schema, lease, fenced saves, ledger, reads.

Tables (`SCHEMA`): `runs` (one head row per run, plus the columns `harness list` shows),
`run_items` (one row per item of a list that only grows, and per dedupe-cache entry),
`leases` (who may write a run, until when, at which epoch) and `tool_ledger` (one row per
started write, `UNIQUE(run_id, tool_call_id)`).

**One writer per run.** `claim(run_id)` takes the run's lease row: free, expired, or held by
a process of this host that is gone. It bumps the run's *epoch*, and a heartbeat thread renews
the lease every third of `lease_seconds`. Every save is one transaction that first renews the
lease `WHERE owner = me AND epoch = mine`; if another process took the run over (this one was
paused past its lease), that matches no row, and the save raises `Fenced` having written
nothing. A save outside a claim (the Python API in one process) is refused only while another
process holds a live lease.

**The tool ledger** is written in the same transaction as the run: an intent opens a row (a
second open intent for the same call is refused: `LedgerConflict`); its result closes it.

The engine-specific parts (how to connect, placeholders, the database's clock, a save that
only appends as one statement where the engine has one: `_append`) live in `sqlite.py` and
`postgres.py`, behind the engine seam of `SqlStore`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Protocol

from harness.codec import StateFileError
from harness.state import Approval, Intent, RunState, check_run_id, pending
from harness.store.errors import Fenced, LedgerConflict, RunOwned, StoreError, TransactionExpired
from harness.store.masking import mask_command
from harness.store.rows import CACHE, Delta, Tracker, assemble

DB_SCHEMA_VERSION = 1
"""The layout of the tables; a database written by a newer layout is refused, not guessed at."""
DEFAULT_LEASE_SECONDS = 30.0
"""How long a claim outlives its holder's last heartbeat (`HARNESS_LEASE_SECONDS`)."""
IDLE_FLOOR_SECONDS = 5.0
"""The shortest stall inside a save after which its holder is treated as stuck: a busy machine
may stall a live save that long."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS harness_schema (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, head TEXT NOT NULL, status TEXT NOT NULL, turns INTEGER NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL, waiting_call TEXT, waiting_tool TEXT,
        updated_at DOUBLE PRECISION NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS run_items (
        run_id TEXT NOT NULL, field TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (run_id, field, seq))""",
    """CREATE TABLE IF NOT EXISTS leases (
        run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, owner TEXT, holder TEXT,
        until DOUBLE PRECISION NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tool_ledger (
        run_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL,
        state TEXT NOT NULL, attempt INTEGER NOT NULL, epoch INTEGER NOT NULL,
        UNIQUE (run_id, tool_call_id))""",
)


TABLES = frozenset({"harness_schema", "runs", "run_items", "leases", "tool_ledger"})


class Tx(Protocol):
    """One open transaction: `?` placeholders, rows as tuples."""

    def execute(self, sql: str, params: tuple = ()) -> int: ...
    def executemany(self, sql: str, rows: list[tuple]) -> None: ...
    def fetchall(self, sql: str, params: tuple = ()) -> list[tuple]: ...
    def now(self) -> float: ...
    clock: str
    """The database's clock in seconds since the epoch, as an SQL expression."""


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One line of `harness list`."""

    run_id: str
    status: str
    turns: int
    cost_usd: float
    waiting_call: str | None
    waiting_tool: str | None
    updated_at: float


@dataclass(kw_only=True)
class RunListing:
    """`harness list`: the runs that read, and why each damaged `runs` row does not."""

    runs: list[RunSummary] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class _Claim:
    owner: str
    epoch: int
    stop: threading.Event


class SqlStore:
    """The shared logic; subclasses give `_transaction()` and `label`."""

    label = "database"
    for_update = ""
    """Appended to a lease read inside a transaction (PostgreSQL locks the row)."""

    def __init__(self, *, lease_seconds: float | None = None) -> None:
        name, given = "lease_seconds", lease_seconds
        if lease_seconds is None:
            name, given = "HARNESS_LEASE_SECONDS", os.environ.get("HARNESS_LEASE_SECONDS") or ""
            try:
                lease_seconds = float(given) if given else DEFAULT_LEASE_SECONDS
            except ValueError:
                lease_seconds = math.nan
        # An infinite lease would read as no lease at all (an expiry must be a finite time).
        if not (isinstance(lease_seconds, int | float) and math.isfinite(lease_seconds)
                and lease_seconds > 0):
            raise StoreError(f"{name} must be a finite number of seconds > 0, got {given!r}")
        self.lease_seconds = lease_seconds
        self._tracker = Tracker()
        self._claims: dict[str, _Claim] = {}
        self.saves = 0
        self.checkpoint: Callable[[str], None] | None = None
        """Test hook: called with "mid_save" inside every save's transaction, before it commits."""

    # --- engine seam ---------------------------------------------------------------------

    def _transaction(self, *, write: bool = True,
                     synced: bool = False) -> contextlib.AbstractContextManager[Tx]:
        """One transaction; `synced`: its commit reaches the disk before it returns, whatever the
        store's durability (`harness.store.durability`)."""
        raise NotImplementedError

    def _append(self, state: RunState) -> bool:
        """Save `state` another way than one transaction of several statements, when the engine
        has one for this save; False: it has not, and nothing was written."""
        return False

    def close(self) -> None:
        """Release connections (claims end with their `with` blocks)."""

    def _tables(self, tx: Tx) -> set[str]:
        """The names of the tables the store's statements would find."""
        raise NotImplementedError

    def _lock_schema(self, tx: Tx) -> None:
        """Inside the transaction that creates the tables: wait for any other process doing so."""

    def _create_schema(self) -> None:
        # Looked at first in a read: a database already set up is opened without the write lock,
        # so `harness list` reads beside a writer (SQLite) and nothing waits for anyone.
        with self._transaction(write=False) as tx:
            if TABLES <= self._tables(tx) and tx.fetchall("SELECT version FROM harness_schema"):
                return self._check_schema(tx)
        with self._transaction() as tx:
            self._lock_schema(tx)
            for statement in SCHEMA:
                tx.execute(statement)
            if not tx.fetchall("SELECT version FROM harness_schema"):
                tx.execute("INSERT INTO harness_schema (version) VALUES (?)", (DB_SCHEMA_VERSION,))
            self._check_schema(tx)

    def _check_schema(self, tx: Tx) -> None:
        rows = tx.fetchall("SELECT version FROM harness_schema")
        if rows and rows[0][0] != DB_SCHEMA_VERSION:
            raise StoreError(
                f"{self.label} has table layout version {rows[0][0]!r}; this harness reads version "
                f"{DB_SCHEMA_VERSION} only (a newer harness wrote it?); nothing was written"
            )

    # --- the lease -----------------------------------------------------------------------

    @contextlib.contextmanager
    def claim(self, run_id: str) -> Iterator[None]:
        """Own `run_id` while the block runs; `RunOwned` at once if a live process owns it."""
        check_run_id(run_id)
        owner = secrets.token_hex(8)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": round(time.time(), 3),
                  "command": mask_command(sys.argv)[:500]}
        with self._transaction() as tx:
            epoch = self._take(tx, run_id, owner, holder)
        claim = _Claim(owner=owner, epoch=epoch, stop=threading.Event())
        self._claims[run_id] = claim
        beat = threading.Thread(target=self._heartbeat, args=(run_id, claim), daemon=True,
                                name=f"lease-{run_id}")
        beat.start()
        try:
            yield
        finally:
            claim.stop.set()
            beat.join()
            self._claims.pop(run_id, None)
            with contextlib.suppress(Exception):  # an unreachable database: the lease expires
                with self._transaction() as tx:
                    tx.execute("UPDATE leases SET owner = NULL, holder = NULL, until = 0 "
                               "WHERE run_id = ? AND owner = ? AND epoch = ?", (run_id, owner, epoch))

    def _take(self, tx: Tx, run_id: str, owner: str, holder: dict[str, object]) -> int:
        tx.execute("INSERT INTO leases (run_id, epoch, owner, holder, until) VALUES (?, 0, NULL, NULL, 0) "
                   "ON CONFLICT (run_id) DO NOTHING", (run_id,))
        ((epoch, current, raw, until),) = tx.fetchall(
            "SELECT epoch, owner, holder, until FROM leases WHERE run_id = ?" + self.for_update, (run_id,))
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise StoreError(f"{self.label}: the lease row of run {run_id} is damaged (epoch {epoch!r})")
        if _live(current, until, tx.now()) and not _gone(_holder(raw)):
            raise RunOwned(run_id, _holder(raw))
        tx.execute("UPDATE leases SET epoch = ?, owner = ?, holder = ?, until = ? WHERE run_id = ?",
                   (epoch + 1, owner, json.dumps(holder), tx.now() + self.lease_seconds, run_id))
        return epoch + 1

    def _heartbeat(self, run_id: str, claim: _Claim) -> None:
        while not claim.stop.wait(self.lease_seconds / 3):
            with contextlib.suppress(Exception):  # a blip: the next beat, or fencing, decides
                with self._transaction() as tx:
                    tx.execute(renew(tx.clock), (self.lease_seconds, run_id, claim.owner, claim.epoch))

    def _paused_out(self, run_id: str) -> Fenced:
        """This process sat paused inside a save past its lease and the database ended the save:
        its claim is over (no more heartbeats, every later save refused)."""
        claim = self._claims[run_id]
        claim.stop.set()
        now = None
        with contextlib.suppress(Exception):  # who holds the run now is worth saying, not waiting for
            with self._transaction(write=False) as tx:
                rows = tx.fetchall("SELECT epoch, owner FROM leases WHERE run_id = ?", (run_id,))
            if rows and rows[0][1] is not None and rows[0][1] != claim.owner:
                now = rows[0][0]
        return Fenced(run_id, claim.epoch, now, paused=True)

    def _fence(self, tx: Tx, run_id: str) -> int:
        """Inside a save: renew our lease, or refuse (`Fenced`, `RunOwned`); the epoch written."""
        claim = self._claims.get(run_id)
        if claim is not None and claim.stop.is_set():
            raise Fenced(run_id, claim.epoch, None, paused=True)
        if claim is not None:
            if tx.execute(renew(tx.clock), (self.lease_seconds, run_id, claim.owner, claim.epoch)) != 1:
                raise fenced_error(tx, run_id, claim.epoch)
            return claim.epoch
        rows = tx.fetchall(
            "SELECT epoch, owner, holder, until FROM leases WHERE run_id = ?" + self.for_update, (run_id,))
        if rows and _live(rows[0][1], rows[0][3], tx.now()) and not _gone(_holder(rows[0][2])):
            raise RunOwned(run_id, _holder(rows[0][2]))
        return rows[0][0] if rows and isinstance(rows[0][0], int) else 0

    # --- saving --------------------------------------------------------------------------

    def save(self, state: RunState) -> None:
        check_run_id(state.run_id)
        try:
            if self._append(state):
                self._tracker.written(state)
                self.saves += 1
                return
            # An open intent is what stops a write from running twice: it is on disk before the tool runs.
            with self._transaction(synced=bool(state.intents)) as tx:
                epoch = self._fence(tx, state.run_id)  # the layout is checked by the head's write
                open_intents = None
                follows = self._tracker.follows(state)
                if not follows:
                    # A call in doubt because the ledger shows it done (`load`) stays done.
                    open_intents = frozenset(c for c, st in tx.fetchall(
                        "SELECT tool_call_id, state FROM tool_ledger WHERE run_id = ?", (state.run_id,))
                        if st == "intent" or (st == "done" and c in state.intents))
                delta = self._tracker.delta(state, open_intents, follows=follows)
                self._write(tx, state, delta, epoch)
                if self.checkpoint is not None:
                    self.checkpoint("mid_save")
        except BaseException as e:
            self._tracker.forget(state.run_id)
            if isinstance(e, TransactionExpired) and state.run_id in self._claims:
                raise self._paused_out(state.run_id) from None
            raise
        self._tracker.written(state)
        self.saves += 1

    def _write(self, tx: Tx, state: RunState, delta: Delta, epoch: int) -> None:
        rid = state.run_id
        if delta.rewrite:
            tx.execute("DELETE FROM run_items WHERE run_id = ?", (rid,))
        if delta.cache_rewrite and not delta.rewrite:
            tx.execute("DELETE FROM run_items WHERE run_id = ? AND field = ?", (rid, CACHE))
        rows = delta.rows()
        for n in range(0, len(rows), ROWS_PER_INSERT):
            # One statement for a turn's few rows: cheaper than a statement per row (executemany).
            chunk = rows[n:n + ROWS_PER_INSERT]
            tx.execute(_insert_items(len(chunk)), tuple(chain.from_iterable((rid, *row) for row in chunk)))
        if tx.execute(HEAD_UPSERT, head_params(state, delta)) == 0:
            self._check_schema(tx)
            raise StoreError(f"{self.label} has no table layout version; nothing was written")
        for call_id, tool, args in delta.started:
            # Only a call a person decided again (abandoned) starts again; one the ledger shows
            # started or done never does, whatever an older copy of the run says.
            opened = tx.execute(
                "INSERT INTO tool_ledger (run_id, tool_call_id, tool, args, state, attempt, epoch) "
                "VALUES (?, ?, ?, ?, 'intent', 1, ?) ON CONFLICT (run_id, tool_call_id) DO UPDATE SET "
                "state = 'intent', attempt = tool_ledger.attempt + 1, tool = excluded.tool, "
                "args = excluded.args, epoch = excluded.epoch WHERE tool_ledger.state = 'abandoned'",
                (rid, call_id, tool, args, epoch))
            if opened != 1:
                now = tx.fetchall("SELECT state FROM tool_ledger WHERE run_id = ? AND tool_call_id = ?",
                                  (rid, call_id))
                raise LedgerConflict(rid, call_id, done=bool(now) and now[0][0] == "done")
        for ids, to in ((delta.finished, "done"), (delta.abandoned, "abandoned")):
            for call_id in ids:
                tx.execute("UPDATE tool_ledger SET state = ? WHERE run_id = ? AND tool_call_id = ?",
                           (to, rid, call_id))

    # --- reading -------------------------------------------------------------------------

    def load(self, run_id: str) -> RunState:
        check_run_id(run_id)
        with self._transaction(write=False) as tx:
            self._check_schema(tx)
            head = tx.fetchall("SELECT head FROM runs WHERE run_id = ?", (run_id,))
            if not head:
                ids = [r[0] for r in tx.fetchall("SELECT run_id FROM runs ORDER BY run_id LIMIT 21")]
                known = ", ".join(ids[:20]) + (", …" if len(ids) > 20 else "") or "none"
                raise FileNotFoundError(f"no saved run {run_id!r} in {self.label}; saved runs: {known}")
            items = tx.fetchall("SELECT field, seq, body FROM run_items WHERE run_id = ? ORDER BY field, seq",
                                (run_id,))
            started = {r[0]: (r[1], r[2]) for r in tx.fetchall(
                "SELECT tool_call_id, tool, args FROM tool_ledger WHERE run_id = ? "
                "AND state IN ('intent', 'done')", (run_id,))}
        for name, seq, body in items:
            if not (isinstance(name, str) and isinstance(seq, int) and isinstance(body, str)):
                raise StateFileError(f"{self.label} run {run_id}: an item row has the wrong column types")
        state = assemble(run_id, head[0][0], items, f"{self.label} run {run_id}")
        _in_doubt_by_the_ledger(state, started)
        if state.cache and not any(name == CACHE for name, _, _ in items):
            self._tracker.forget(run_id)  # its cache is in an older head: the next save writes its rows
        else:
            self._tracker.written(state)
        return state

    def exists(self, run_id: str) -> bool:
        with self._transaction(write=False) as tx:
            return bool(tx.fetchall("SELECT 1 FROM runs WHERE run_id = ?", (check_run_id(run_id),)))

    def run_ids(self) -> list[str]:
        with self._transaction(write=False) as tx:
            return [r[0] for r in tx.fetchall("SELECT run_id FROM runs ORDER BY run_id")]

    def list_runs(self, status: str | None = None) -> list[RunSummary]:
        """Every run (of `status`); a damaged row raises, naming it (`scan_runs` lists the rest)."""
        listing = self.scan_runs(status)
        if listing.damaged:
            raise StateFileError(listing.damaged[0])
        return listing.runs

    def scan_runs(self, status: str | None = None) -> RunListing:
        """Every run (of `status`) that reads, and one message per `runs` row that does not."""
        where, params = (" WHERE status = ?", (status,)) if status else ("", ())
        with self._transaction(write=False) as tx:
            rows = tx.fetchall("SELECT run_id, status, turns, cost_usd, waiting_call, waiting_tool, "
                               "updated_at FROM runs" + where + " ORDER BY updated_at, run_id", params)
        listing = RunListing()
        for row in rows:
            try:
                listing.runs.append(self._summary(row))
            except StateFileError as e:
                listing.damaged.append(str(e))
        return listing

    def _summary(self, row: tuple) -> RunSummary:
        """One `runs` row as typed values; a row edited by hand into other types is refused by name."""
        kinds = {"run_id": str, "status": str, "turns": int, "cost_usd": int | float,
                 "waiting_call": str | None, "waiting_tool": str | None, "updated_at": int | float}
        for (column, kind), value in zip(kinds.items(), row, strict=True):
            bad = isinstance(value, bool) or not isinstance(value, kind)
            if bad or (isinstance(value, float) and not math.isfinite(value)):
                raise StateFileError(f"{self.label}: the runs row of {row[0]!r} is damaged ({column} is "
                                     f"{value!r}); nothing was changed")
        return RunSummary(**dict(zip(kinds, row, strict=True)))

    def ledger(self, run_id: str) -> list[dict[str, Any]]:
        """The run's tool ledger rows: call id, tool, state (intent/done/abandoned), attempt, epoch."""
        with self._transaction(write=False) as tx:
            rows = tx.fetchall("SELECT tool_call_id, tool, state, attempt, epoch FROM tool_ledger "
                               "WHERE run_id = ? ORDER BY tool_call_id", (check_run_id(run_id),))
        return [dict(zip(("call_id", "tool", "state", "attempt", "epoch"), r, strict=True)) for r in rows]

    def lease(self, run_id: str) -> dict[str, Any] | None:
        """The run's lease row as read now (epoch, holder, seconds left), or None."""
        with self._transaction(write=False) as tx:
            rows = tx.fetchall("SELECT epoch, owner, holder, until FROM leases WHERE run_id = ?",
                               (check_run_id(run_id),))
            now = tx.now()
        if not rows:
            return None
        epoch, owner, raw, until = rows[0]
        held = _live(owner, until, now)
        return {"epoch": epoch, "held": held, "holder": _holder(raw),
                "seconds_left": max(0.0, until - now) if held else 0.0}

    def summary(self, run_id: str) -> RunSummary | None:
        """One run's `harness list` line (its row alone), or None when there is no such run."""
        with self._transaction(write=False) as tx:
            rows = tx.fetchall("SELECT run_id, status, turns, cost_usd, waiting_call, waiting_tool, "
                               "updated_at FROM runs WHERE run_id = ?", (check_run_id(run_id),))
        return self._summary(rows[0]) if rows else None

    def change_marker(self, status: str | None = None) -> tuple[Any, ...]:
        """One row that moves whenever a run (of `status`) is saved, added or removed: every save
        stamps its row's `updated_at`. A live page compares it instead of reading every run."""
        where, params = (" WHERE status = ?", (status,)) if status else ("", ())
        with self._transaction(write=False) as tx:
            rows = tx.fetchall("SELECT count(*), max(updated_at), sum(updated_at) FROM runs" + where, params)
        return tuple(rows[0])


@functools.cache
def renew(clock: str) -> str:
    """The statement renewing a claim's lease, `clock` the database's (inside the statement: no
    round trip to read it first)."""
    return f"UPDATE leases SET until = {clock} + ? WHERE run_id = ? AND owner = ? AND epoch = ?"


HEAD_INSERT = (
    "INSERT INTO runs (run_id, head, status, turns, cost_usd, waiting_call, waiting_tool, updated_at) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ? FROM harness_schema WHERE version = ?")
"""A save's head row, written only beside the table layout this harness knows, so that a database
a newer harness changed under a live run is refused by the save's own write (no extra read)."""
HEAD_CONFLICT = (
    " ON CONFLICT (run_id) DO UPDATE SET head = excluded.head, status = excluded.status, "
    "turns = excluded.turns, cost_usd = excluded.cost_usd, waiting_call = excluded.waiting_call, "
    "waiting_tool = excluded.waiting_tool, updated_at = excluded.updated_at")


HEAD_UPSERT = HEAD_INSERT + HEAD_CONFLICT


def head_params(state: RunState, delta: Delta) -> tuple:
    """The values of `HEAD_INSERT`."""
    waiting = state.stop if isinstance(state.stop, Approval) else None
    return (state.run_id, delta.head, state.status, state.turns, state.cost_usd,
            waiting.call_id if waiting else None, waiting.tool_name if waiting else None, time.time(),
            DB_SCHEMA_VERSION)


def fenced_error(tx: Tx, run_id: str, epoch: int) -> Fenced:
    """The error for a save whose lease renewal matched no row: who holds the run now, if anyone."""
    rows = tx.fetchall("SELECT epoch, owner FROM leases WHERE run_id = ?", (run_id,))
    return Fenced(run_id, epoch, rows[0][0] if rows and rows[0][1] else None)


ROWS_PER_INSERT = 200
"""Item rows per INSERT: 800 placeholders, far below either engine's limit."""


@functools.cache
def _insert_items(rows: int) -> str:
    return "INSERT INTO run_items (run_id, field, seq, body) VALUES " + ", ".join(["(?, ?, ?, ?)"] * rows)


def _in_doubt_by_the_ledger(state: RunState, started: dict[str, tuple[str, str]]) -> None:
    """A pending call the ledger shows started or done, which the run does not know it started
    (the run was restored from an older copy): the ledger wins, the call is in doubt, and the
    loop stops for a person instead of running it again. A pending call that only reuses the id
    of another (another tool or other arguments) is not the ledger's call: the loop decides it."""
    for call in pending(state):
        if call["id"] in started and call["id"] not in state.intents:
            try:
                args = json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                args = {}
            tool, ledger_args = started[call["id"]]
            if tool != call["function"]["name"] or _parsed(ledger_args) != args:
                continue
            state.intents[call["id"]] = Intent(call_id=call["id"], tool=call["function"]["name"], args=args)


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _live(owner: object, until: object, now: float) -> bool:
    """Whether a lease row is held and unexpired; a row edited into nonsense holds nothing."""
    return (owner is not None and not isinstance(until, bool) and isinstance(until, int | float)
            and math.isfinite(until) and until > now)


def _holder(raw: object) -> dict[str, object]:
    """A lease's holder as its holder wrote it; anything unreadable is an empty holder."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    if isinstance(data.get("command"), str):  # masked again: a row written by an older harness
        data["command"] = mask_command(data["command"].split(" "))
    return data


def _gone(holder: dict[str, object]) -> bool:
    """Whether the holder was a process of this host that no longer exists (its lease can go at
    once instead of after it expires: a SIGKILLed worker does not keep its runs)."""
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or isinstance(pid, bool) or not isinstance(pid, int):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed child not yet reaped by its parent still has a pid: it holds nothing."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
