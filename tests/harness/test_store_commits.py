"""What a turn costs the database: a turn whose calls are read-only is one commit, its reply and
results together; on PostgreSQL that commit is one round trip to the server, claimed or not.
Counted per turn as the difference between a 12-turn and a 2-turn run of `runaway`, after a run
long enough for psycopg to have prepared the save's statement (one round trip, once)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from psycopg import pq

from harness import Limits, SQLiteStore, new_run
from harness.store.postgres import PostgresStore

SHORT, LONG = 2, 12


@pytest.fixture
def traced_postgres(monkeypatch, tmp_path):
    """`open(url)`: a PostgresStore whose every connection writes libpq's trace of what it sends
    and receives to a file of its own; `count()`: the round trips (a `ReadyForQuery` from the
    server ends each) and the transactions ended (it reports idle) in all of them so far."""
    configure, conns, folder = PostgresStore._configure, [], tmp_path / "trace"
    folder.mkdir()

    def traced(self, conn) -> None:
        configure(self, conn)
        out = (folder / f"{len(conns)}.txt").open("w")  # one file each: libpq buffers per connection
        conns.append((conn, out))
        _trace(conn, out)

    monkeypatch.setattr(PostgresStore, "_configure", traced)

    def count() -> tuple[int, int]:
        for conn, _ in conns:
            with contextlib.suppress(Exception):  # a connection the pool closed was flushed then
                conn.pgconn.untrace()  # flushes
        lines = [line for f in folder.iterdir() for line in f.read_text().splitlines()]
        ready = [line for line in lines if line.startswith("B\t5\tReadyForQuery")]
        for conn, out in conns:
            with contextlib.suppress(Exception):
                _trace(conn, out)
        return len(ready), sum(line.endswith("I") for line in ready)

    yield count
    for _, out in conns:
        out.close()


def _trace(conn, out) -> None:
    conn.pgconn.trace(out.fileno())
    conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)


def _per_turn(drive, store, measure, *, claimed: bool) -> tuple[float, ...]:
    """What `measure()` counts for one turn of `runaway`, from a long and a short run."""
    counts = []
    for n, turns in enumerate((LONG, SHORT, LONG)):
        state = new_run("t", run_id=f"r{n}-{turns}")
        store.save(state)
        with store.claim(state.run_id) if claimed else contextlib.nullcontext():
            before = measure()
            drive("runaway", state=state, store=store, limits=Limits(max_turns=turns))
            counts.append([b - a for a, b in zip(before, measure(), strict=True)])
        assert state.turns == turns
    return tuple((long - short) / (LONG - SHORT) for _, short, long in zip(*counts, strict=True))


@pytest.mark.parametrize("claimed", [False, True], ids=["unclaimed", "claimed"])
def test_a_read_only_turn_is_one_round_trip_to_postgresql(drive, pg_url, traced_postgres, claimed):
    store = PostgresStore(pg_url)
    try:
        round_trips, commits = _per_turn(drive, store, traced_postgres, claimed=claimed)
        assert store.load(f"r2-{LONG}").turns == LONG
    finally:
        store.close()
    assert (round_trips, commits) == (1, 1)


@pytest.mark.parametrize("claimed", [False, True], ids=["unclaimed", "claimed"])
def test_a_read_only_turn_is_one_sqlite_commit(drive, tmp_path: Path, claimed):
    store, statements = SQLiteStore(tmp_path / "harness.db"), []
    store._conn.set_trace_callback(statements.append)

    def measure() -> tuple[int, int]:
        return sum(s == "COMMIT" for s in statements), len(statements)

    try:
        commits, per_turn = _per_turn(drive, store, measure, claimed=claimed)
    finally:
        store.close()
    # BEGIN, the lease renewed (claimed) or read, the item rows, the head, COMMIT.
    assert (commits, per_turn) == (1, 5)


def test_a_write_turn_commits_its_intent_before_the_tool_and_its_result_after_on_postgresql(
        drive, pg_url, traced_postgres):
    store = PostgresStore(pg_url)
    try:
        state = new_run("t", run_id="w")
        store.save(state)
        before = traced_postgres()
        s = drive("double_delete", state=state, store=store, auto_approve={"delete_file"})
        _, commits = (b - a for a, b in zip(before, traced_postgres(), strict=True))
        assert [row["state"] for row in store.ledger("w")] == ["done", "done"]
    finally:
        store.close()
    assert (s.status, commits) == ("completed", 5)  # per delete: its intent, its result; the answer
