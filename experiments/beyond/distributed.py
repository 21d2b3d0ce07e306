"""`make distributed`: runs shared by processes through nothing but a PostgreSQL URL, under
SIGKILL and SIGSTOP, measured.

For 1, 2 and 4 workers, calm and then under faults: a fresh database holds a queue of
`destructive` runs (each stops for a person's approval of `delete_file`); two approver processes
decide (three in four approved); under faults, every 0.5–1.5 s one worker is SIGKILLed (and a
fresh one started), or one that holds a run is SIGSTOPped for three leases and then continued.
The faults stop when the queue is empty or after `FAULT_SECONDS`, and the fleet then drains the
queue calmly. Every process has its own working folder and HOME
(`experiments/beyond/distributed_roles.py`). When the queue is empty (or the row's deadline
came first):

- runs lost: runs filed as done that did not complete (must be 0);
- runs unfinished: runs still queued at the deadline, not lost: resumable work the row had no
  time for (a loaded machine, not a broken promise);
- effects per approved call: lines in the witness file with that call's idempotency key, which
  the delete tool writes outside the database (exactly 1 once its run completed, at most 1 while
  it is unfinished; 0 for a rejected call);
- decisions lost: an approver's verdict refused because the other approver decided first;
- writes refused by fencing: saves by a worker that woke up after its lease was taken over;
- runs/s: queued runs over the wall time to drain the queue, kills and pauses included.

Loopback only, bounded (`RUNS_PER_WORKER` runs a worker, at most `DEADLINE_SECONDS` per row,
both time limits scaled by the machine's load: `slowdown`). Writes `results/distributed.md` and
`.csv`; exit status 1 if a run was lost or an effect was not once (unfinished runs are reported).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psycopg

from experiments.beyond.distributed_roles import LEASE_SECONDS
from experiments.lab.paths import RESULTS, ROOT
from experiments.lab.postgres import new_database, throwaway_server
from experiments.lab.report import csv_text, markdown_table
from experiments.lab.servers import mock_server
from harness import open_store

NAME = "distributed"
WORKERS = (1, 2, 4)
APPROVERS = 2
RUNS_PER_WORKER = 8
DEADLINE_SECONDS = 120.0
"""A row's time limit on an idle machine, faults and drain included (`slowdown` scales it)."""
FAULT_SECONDS = 30.0
"""How long faults are injected at most (scaled alike); the rest of the deadline is a calm drain."""
PAUSE_LEASES = 3


@dataclass(frozen=True, kw_only=True)
class Row:
    workers: int
    faults: bool
    runs: int
    completed: int
    lost: int
    """Runs filed as done that did not complete."""
    unfinished: int
    """Runs still queued when the row's deadline came: work not done yet, not work lost."""
    approved_calls: int
    effects_not_once: int
    """Approved calls whose witness count is not exactly 1, plus rejected calls with any effect."""
    in_doubt: int
    decisions_lost: int
    """Decisions refused because the other approver had decided the call first."""
    fenced_writes: int
    kills: int
    pauses: int
    seconds: float

    @property
    def runs_per_s(self) -> float:
        return (self.runs - self.unfinished) / self.seconds


def slowdown() -> float:
    """How much slower than an idle machine this one runs now: its load average per core (at
    least 1). The rows' time limits scale by it, so a loaded machine still finishes its work."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


class _Fleet:
    """The processes of one row, each in its own folder with its own HOME."""

    def __init__(self, db: str, mock_url: str, logs: Path, root: Path) -> None:
        self.db, self.mock_url, self.logs, self.root = db, mock_url, logs, root
        self.workers: list[subprocess.Popen] = []
        self.others: list[subprocess.Popen] = []
        self.stderr: dict[int, Path] = {}
        self.count = 0

    def spawn(self, role: str) -> subprocess.Popen:
        self.count += 1
        home = self.root / f"{role}-{self.count}"
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
        argv = [sys.executable, "-m", "experiments.beyond.distributed_roles", role, self.db, self.mock_url,
                str(self.logs)]
        with open(home / "stderr", "wb") as err:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(argv, cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=err)
        self.stderr[proc.pid] = home / "stderr"
        (self.workers if role == "worker" else self.others).append(proc)
        return proc

    def stop_all(self) -> list[str]:
        """Stop every process; the stderr tails of those that had died on their own."""
        died = [p for p in self.workers + self.others if p.poll() not in (None, -signal.SIGKILL)]
        for p in self.workers + self.others:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            p.wait()
        return [f"{p.args[3]} pid {p.pid} exited {p.returncode}: {self.stderr[p.pid].read_text()[-800:]}"
                for p in died]


def _holders(db: str) -> set[int]:
    """Pids holding a live lease now (a pause of one of them is the case fencing is for)."""
    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute("SELECT holder FROM leases WHERE owner IS NOT NULL AND "
                            "until > EXTRACT(EPOCH FROM clock_timestamp())").fetchall()
    return {json.loads(r[0]).get("pid") for r in rows if r[0]}


def _chaos(fleet: _Fleet, calm: threading.Event, rng: random.Random, tally: Counter) -> None:
    """Every 0.5-1.5 s until `calm`: SIGKILL a random worker (and start another), or SIGSTOP a
    random worker that holds a run, for `PAUSE_LEASES` leases (long enough for another worker to
    take it over)."""
    while not calm.wait(rng.uniform(0.5, 1.5)):
        alive = [p for p in fleet.workers if p.poll() is None]
        if not alive:
            continue
        if rng.random() < 0.5:
            victim = rng.choice(alive)
            victim.kill()
            victim.wait()
            fleet.spawn("worker")
            tally["kills"] += 1
            continue
        holding = [p for p in alive if p.pid in _holders(fleet.db)]
        victim = rng.choice(holding or alive)
        os.kill(victim.pid, signal.SIGSTOP)
        tally["pauses"] += 1
        calm.wait(PAUSE_LEASES * LEASE_SECONDS)
        os.kill(victim.pid, signal.SIGCONT)


def measure_row(server: str, mock_url: str, workers: int, rng: random.Random, *, faults: bool) -> Row:
    db = new_database(server)
    runs = [f"run{i:03d}" for i in range(workers * RUNS_PER_WORKER)]
    open_store(db).close()  # the store's tables, before any process races to create them
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE queue (run_id TEXT PRIMARY KEY, state TEXT NOT NULL)")
        for r in runs:
            conn.execute("INSERT INTO queue VALUES (%s, 'ready')", (r,))
    scale = slowdown()  # before the fleet starts: the load of others, not of this row
    with tempfile.TemporaryDirectory(prefix="distributed-") as folder:
        root, logs = Path(folder), Path(folder) / "logs"
        logs.mkdir()
        fleet, tally, calm = _Fleet(db, mock_url, logs, root), Counter(), threading.Event()
        started = time.perf_counter()
        for _ in range(workers):
            fleet.spawn("worker")
        for _ in range(APPROVERS):
            fleet.spawn("approver")
        chaos = threading.Thread(target=_chaos, args=(fleet, calm, rng, tally))
        if faults:
            chaos.start()
        with psycopg.connect(db, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM queue WHERE state <> 'done'").fetchone()[0]:
                elapsed = time.perf_counter() - started
                if elapsed > FAULT_SECONDS * scale:
                    calm.set()  # the faults stop; the fleet drains the queue
                if elapsed > DEADLINE_SECONDS * scale:
                    break
                time.sleep(0.05)
        seconds = time.perf_counter() - started
        calm.set()
        if faults:
            chaos.join()
        for tail in fleet.stop_all():  # a process that died on its own is a finding: say why
            print(f"distributed: {tail}", file=sys.stderr, flush=True)
        return _tally(db, runs, logs, workers, faults, tally, seconds)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _tally(db: str, runs: list[str], logs: Path, workers: int, faults: bool, tally: Counter,
           seconds: float) -> Row:
    store = open_store(db)
    try:
        completed = {r.run_id for r in store.list_runs("completed")} & set(runs)
    finally:
        store.close()
    with psycopg.connect(db, autocommit=True) as conn:
        queued = {r[0] for r in conn.execute("SELECT run_id FROM queue WHERE state <> 'done'").fetchall()}
    unfinished = (set(runs) - completed) & queued
    effects = Counter(_lines(logs / "witness.log"))
    events = [line.split() for line in _lines(logs / "events.log")]
    approved = {e[1] for e in events if e[0] == "approve"}
    rejected = {e[1] for e in events if e[0] == "reject"}

    def finished(key: str) -> bool:  # a key is "<run id>:<call id>"
        return key.split(":", 1)[0] not in unfinished

    # An approved call of a run still unfinished may not have taken effect yet; more than once
    # is wrong whenever it happens.
    wrong = sum(effects[k] > 1 or (effects[k] == 0 and finished(k)) for k in approved)
    wrong += sum(effects[k] != 0 for k in rejected)
    wrong += sum(1 for k in effects if k not in approved and finished(k))  # an effect nobody approved
    return Row(workers=workers, faults=faults, runs=len(runs), completed=len(completed),
               lost=len(set(runs) - completed - unfinished), unfinished=len(unfinished),
               approved_calls=len(approved), effects_not_once=wrong,
               in_doubt=sum(e[0] == "in_doubt" for e in events),
               decisions_lost=sum(e[0] == "lost" for e in events),
               fenced_writes=sum(e[0] == "fenced" for e in events), kills=tally["kills"],
               pauses=tally["pauses"], seconds=seconds)


def table(rows: list[Row]) -> list[dict[str, object]]:
    return [{"workers": r.workers, "faults": "kill + stop" if r.faults else "none", "runs": r.runs,
             "completed": r.completed, "lost": r.lost, "unfinished": r.unfinished,
             "approved calls": r.approved_calls, "effects not exactly once": r.effects_not_once,
             "in-doubt calls": r.in_doubt, "decisions lost to the other approver": r.decisions_lost,
             "writes refused by fencing": r.fenced_writes,
             "SIGKILLs": r.kills, "SIGSTOPs": r.pauses, "runs/s": round(r.runs_per_s, 2)} for r in rows]


def write(rows: list[Row]) -> None:
    shown = table(rows)
    (RESULTS / f"{NAME}.csv").write_text(csv_text(shown))
    ok = all(r.lost == 0 and r.effects_not_once == 0 for r in rows)
    drained = all(r.unfinished == 0 for r in rows)
    text = (
        "# Distributed runs: workers sharing only a PostgreSQL URL, under SIGKILL and SIGSTOP\n\n"
        f"Made by `make distributed`. Lease {LEASE_SECONDS:g} s; {APPROVERS} approver processes; "
        f"{RUNS_PER_WORKER} `destructive` runs per worker; a worker SIGKILLed, or one holding a run "
        f"SIGSTOPped for {PAUSE_LEASES * LEASE_SECONDS:g} s, every 0.5–1.5 s under faults (for at most "
        f"{FAULT_SECONDS:g} s, then the queue drains calmly; both limits scale with the machine's load). "
        "Effects are counted by a witness file outside the database (one line per delete, keyed by "
        "the call's idempotency key). Unfinished runs were still queued at the row's deadline: "
        "resumable work, not lost.\n\n"
        + markdown_table(shown)
        + f"\n\nNo run lost and every approved call took effect exactly once: **{ok}**. "
        f"Every queue drained before its deadline: **{drained}**.\n"
    )
    (RESULTS / f"{NAME}.md").write_text(text)


def main() -> int:
    rng = random.Random(2026)
    with throwaway_server() as server, mock_server() as (mock_url, _):
        rows = []
        for faults in (False, True):
            for n in WORKERS:
                rows.append(measure_row(server, mock_url, n, rng, faults=faults))
                print(f"distributed: {table(rows[-1:])[0]}", flush=True)
                if rows[-1].unfinished:
                    print(f"distributed: {rows[-1].unfinished} run(s) unfinished at the deadline "
                          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", file=sys.stderr)
    write(rows)
    return 0 if all(r.lost == 0 and r.effects_not_once == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
