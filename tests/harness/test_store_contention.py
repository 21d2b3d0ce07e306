"""Stores under contention: a writer paused inside a save, processes racing to a fresh database,
another application's database file.

Real processes and real signals: a child SIGSTOPs itself at the store's "mid_save" checkpoint,
inside the save's transaction, and the test waits for the kernel to report it stopped.
"""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from pause_support import paused_mid_save, stopped

from harness import SQLiteStore, new_run, open_store
from harness.cli import REFUSED, main
from harness.store import StoreBusy
from harness.store.stuck import held_runs


def _end(child: subprocess.Popen) -> None:
    if child.poll() is None:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()
    child.communicate()


@pytest.fixture
def stuck_sqlite_writer(tmp_path):
    db = tmp_path / "harness.db"
    child = paused_mid_save(f"sqlite:///{db}", 0.5)
    yield db, child
    _end(child)


def test_list_and_show_read_while_a_writer_is_stopped_inside_a_save(stuck_sqlite_writer, capsys):
    db, _ = stuck_sqlite_writer
    url = f"sqlite:///{db}"
    assert main(["--store", url, "list", "--json"]) == 0
    assert [json.loads(line)["run_id"] for line in capsys.readouterr().out.splitlines()] == ["r1"]
    assert main(["--store", url, "show", "r1", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["run"]["messages"][-1]["content"] == "first holder"


def test_a_writer_stuck_inside_a_save_is_named_with_the_way_to_recover(stuck_sqlite_writer):
    db, child = stuck_sqlite_writer
    store = SQLiteStore(db, busy_seconds=0.5)
    try:
        with pytest.raises(StoreBusy) as stuck:
            with store.claim("r1"):
                pass
        message = str(stuck.value)
        assert f"process {child.pid}" in message and "stopped" in message and "r1" in message, message
        assert f"kill -CONT {child.pid}" in message and f"kill {child.pid}" in message, message
        assert "PostgreSQL" in message and "nothing was written" in message, message
        # The documented way out: end the stuck process. SQLite rolls its half save back, and its
        # lease goes at once (its holder is gone).
        child.kill()
        child.communicate()
        with store.claim("r1"):
            assert store.load("r1").messages[-1]["content"] == "first holder"
    finally:
        store.close()


def test_the_stuck_writer_is_named_with_its_own_runs_not_another_hosts_with_the_same_pid():
    # The lock's holder is a process of this host; a lease row of another host may carry its pid.
    here, pid = socket.gethostname(), 4242
    leases = [("mine", json.dumps({"pid": pid, "host": here})),
              ("theirs", json.dumps({"pid": pid, "host": here + "-other"}))]
    assert held_runs(leases, pid) == ["mine"]


def test_the_cli_refuses_with_exit_4_naming_the_stuck_writer(stuck_sqlite_writer, capsys, monkeypatch):
    db, child = stuck_sqlite_writer
    monkeypatch.setenv("HARNESS_LEASE_SECONDS", "0.5")  # a writer waits a lease (at least 5 s), not 30 s
    assert main(["--store", f"sqlite:///{db}", "resume", "r1"]) == REFUSED
    err = capsys.readouterr().err
    assert err.startswith("harness: refused: ") and f"process {child.pid}" in err, err
    assert err.count("\n") == 1, err


def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(tmp_path, capsys):
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ann')")
    conn.close()
    before = db.read_bytes()
    assert main(["--store", f"sqlite:///{db}", "list"]) == 2
    err = capsys.readouterr().err
    assert "another application's" in err and "users" in err and "nothing was created" in err, err
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.parametrize("kind", ["empty file", "empty database", "ours"])
def test_an_empty_file_an_empty_database_or_our_own_is_used(kind, tmp_path):
    db = tmp_path / "harness.db"
    if kind == "empty file":
        db.touch()
    elif kind == "empty database":
        sqlite3.connect(db).close()
    else:
        SQLiteStore(db).save(new_run("t", run_id="a1"))
    store = SQLiteStore(db)
    try:
        store.save(new_run("t", run_id="b1"))
        assert "b1" in store.run_ids()
    finally:
        store.close()


FIRST_USER = """
import sys
from harness import open_store
print("ready", flush=True)
sys.stdin.readline()
open_store(sys.argv[1]).close()
print("opened", flush=True)
"""


def test_any_number_of_processes_can_be_the_first_users_of_a_fresh_database(pg_url):
    children = [subprocess.Popen([sys.executable, "-c", FIRST_USER, pg_url], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(8)]
    try:
        for child in children:
            assert child.stdout.readline() == "ready\n", child.stderr.read()
        for child in children:  # released together: every one finds the database empty
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    failed = [err for child, (_, err) in zip(children, results, strict=True) if child.returncode]
    assert not failed, failed[0]
    assert all(out == "opened\n" for out, _ in results)


PAUSED_CLI = r"""
import os, signal, sys
from harness.cli import main
seen = []
def hook(name):
    seen.append(name)
    if name == "mid_save" and seen.count("mid_save") == 2:
        print("pausing", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
sys.exit(main(sys.argv[1:], checkpoint=hook))
"""


def _idle_in_transaction(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND state = 'idle in transaction'").fetchone()[0]


@pytest.mark.slow
def test_a_worker_paused_inside_a_save_past_the_servers_timeout_wakes_fenced_exit_4(pg_url, mock_url,
                                                                                    tmp_path):
    # The second save opens delete_file's intent: a transaction of several statements, which the
    # worker pauses inside (a save that only appends is one statement, no transaction to pause in).
    argv = ["--store", pg_url, "--state-dir", str(tmp_path), "--base-url", mock_url,
            "run", "--scenario", "destructive", "--auto-approve", "delete_file", "--run-id", "p1"]
    child = subprocess.Popen([sys.executable, "-c", PAUSED_CLI, *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "HARNESS_LEASE_SECONDS": "1"})
    try:
        assert child.stdout.readline() == "pausing\n", child.stderr.read()
        deadline = time.monotonic() + 30
        while not stopped(child.pid) or _idle_in_transaction(pg_url):  # the server ends its session
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=60)
    finally:
        _end(child)
    assert child.returncode == REFUSED, err
    assert err.startswith("harness: refused: run p1: ") and "fenced" in err and err.count("\n") == 1, err
    store = open_store(pg_url)
    try:
        assert store.load("p1").turns == 1  # the save the server rolled back left nothing behind
        assert (tmp_path / "sandboxes" / "p1" / "access.log").exists()  # and its tool never ran
    finally:
        store.close()
