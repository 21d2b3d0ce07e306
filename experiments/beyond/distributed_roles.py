"""The processes of `make distributed`: workers that drive runs and approvers that decide calls.

`python -m experiments.beyond.distributed_roles worker|approver DB_URL MOCK_URL LOG_DIR`

Each process shares nothing with the others but the database URL: its own working folder,
its own HOME, its own store object. The runs to do are rows of the experiment's own `queue`
table (`ready` for a worker, `waiting` for a person, `done`). A worker takes any `ready` run it
can claim, drives it with the harness until it stops, and files it back; a worker that finds a
run already finished files it as done, so a run whose worker died between saving and filing
is not lost. An approver claims a `waiting` run and approves (three in four) or rejects its
call. The measurement apparatus, outside the database, is two append-only files in LOG_DIR:
`witness.log`, one line per effect (the delete tool writes its idempotency key there), and
`events.log` (decisions, fenced writes).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from harness import ModelClient, OpenAIChat, new_run, open_store, run
from harness.approvals import DecisionLost, approve, reject
from harness.chapter import SYSTEM, chapter_tools, make_sandbox
from harness.state import Approval
from harness.store import Fenced, RunOwned, SqlStore
from harness.tools import ToolContext

LEASE_SECONDS = 1.0
"""Short, so a paused worker's runs are taken over within the measurement."""
TASK = "Free some space: delete the access log."
DOWNSTREAM_SECONDS = 0.3
MOCK_OPTIONS = "latency=100"
"""Each model call takes 100 ms, so a pause is likely to catch a worker holding a run."""


def append_line(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WitnessDelete:
    """`delete_file` whose effect is a line in the witness file: its idempotency key."""

    witness: Path
    name: str = "delete_file"
    description: str = "Delete a file from the folder. Needs a person's approval."
    parameters: dict[str, Any] = field(default_factory=lambda: {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    read_only: bool = False
    needs_approval: bool = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        append_line(self.witness, ctx.idempotency_key)
        # The downstream system's reply takes a while: a kill can land after the effect and
        # before its result is saved, which is the case the idempotency key is for.
        await asyncio.sleep(DOWNSTREAM_SECONDS)
        return f"Deleted {args.get('path')}."


def _queue(conn: psycopg.Connection, state: str) -> list[str]:
    rows = conn.execute("SELECT run_id FROM queue WHERE state = %s ORDER BY random() LIMIT 8", (state,))
    return [r[0] for r in rows.fetchall()]


def _file(conn: psycopg.Connection, run_id: str, state: str) -> None:
    conn.execute("UPDATE queue SET state = %s WHERE run_id = %s", (state, run_id))


def _remaining(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT count(*) FROM queue WHERE state <> 'done'").fetchone()[0]


async def _drive(store: SqlStore, conn: psycopg.Connection, run_id: str, mock_url: str, logs: Path) -> None:
    with store.claim(run_id):
        if store.exists(run_id):
            state = store.load(run_id)
        else:
            state = new_run(TASK, system=SYSTEM, run_id=run_id)
        if state.status in ("completed", "failed"):
            return _file(conn, run_id, "done")
        sandbox = Path.cwd() / "sandboxes" / run_id
        if not sandbox.is_dir():
            make_sandbox(sandbox)
        tools = [t for t in chapter_tools(sandbox) if t.name != "delete_file"]
        tools.append(WitnessDelete(logs / "witness.log"))
        async with ModelClient(mock_url) as client:
            model = OpenAIChat("destructive", client=client, headers={"x-mock-options": MOCK_OPTIONS})
            state = await run(state, model=model, tools=tools, store=store)
        waiting = isinstance(state.stop, Approval)
        _file(conn, run_id, "done" if state.status in ("completed", "failed") else
              "waiting" if waiting else "ready")


async def worker(db: str, mock_url: str, logs: Path) -> None:
    store = open_store(db, lease_seconds=LEASE_SECONDS)
    with psycopg.connect(db, autocommit=True) as conn:
        while _remaining(conn):
            ready = _queue(conn, "ready")
            if not ready:
                await asyncio.sleep(0.02)
            for run_id in ready:
                try:
                    await _drive(store, conn, run_id, mock_url, logs)
                except RunOwned:
                    continue
                except Fenced:
                    append_line(logs / "events.log", f"fenced {run_id} pid={os.getpid()}")


def _decide(store: SqlStore, conn: psycopg.Connection, run_id: str, logs: Path, rng: random.Random) -> None:
    with store.claim(run_id):
        state = store.load(run_id)
        stop = state.stop
        if not isinstance(stop, Approval):
            return _file(conn, run_id, "ready")
        key = f"{run_id}:{stop.call_id}"
        if stop.in_doubt:
            # The idempotency key is how a person (or a tool) asks the downstream system.
            witness = logs / "witness.log"
            done = witness.exists() and key in witness.read_text().split()
            if done:
                reject(state, stop.call_id, reason="it already happened: the witness holds its key")
            else:
                approve(state, stop.call_id)
            store.save(state)
            append_line(logs / "events.log", f"in_doubt {key} {'done' if done else 'redo'}")
        elif rng.random() < 0.75:
            approve(state, stop.call_id)
            store.save(state)
            append_line(logs / "events.log", f"approve {key}")
        else:
            reject(state, stop.call_id, reason="keep the access log")
            store.save(state)
            append_line(logs / "events.log", f"reject {key}")
        _file(conn, run_id, "ready")


def approver(db: str, logs: Path) -> None:
    store = open_store(db, lease_seconds=LEASE_SECONDS)
    rng = random.Random(os.getpid())
    with psycopg.connect(db, autocommit=True) as conn:
        while _remaining(conn):
            waiting = _queue(conn, "waiting")
            if not waiting:
                time.sleep(0.02)
            for run_id in waiting:
                try:
                    _decide(store, conn, run_id, logs, rng)
                except RunOwned:
                    continue
                except DecisionLost:  # the other approver decided first: compare-and-set held
                    append_line(logs / "events.log", f"lost {run_id} pid={os.getpid()}")


def main(argv: list[str]) -> int:
    role, db, mock_url, logs = argv[0], argv[1], argv[2], Path(argv[3])
    if role == "worker":
        asyncio.run(worker(db, mock_url, logs))
    else:
        approver(db, logs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
