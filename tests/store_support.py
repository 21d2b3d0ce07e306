"""Store fixtures for each kind: `make_store` (store objects), `store_url`, `store_for` (URLs);
and a writer paused inside a save by a real SIGSTOP (`paused_mid_save`)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from pgserver import new_database

from harness import MemoryStore, SQLiteStore, open_store


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def make_store(request, tmp_path):
    """Factory: a new store object on the same database each call (another process, in effect);
    the in-memory store has one database per object, so it hands back the same one."""
    opened = []

    def make(**kwargs):
        if request.param == "sqlite":
            store = SQLiteStore(tmp_path / "harness.db", **kwargs)
        elif request.param == "postgres":
            store = open_store(request.getfixturevalue("pg_url"), **kwargs)
        else:
            store = opened[0] if opened else MemoryStore(**kwargs)
        opened.append(store)
        return store

    yield make
    for store in {id(s): s for s in opened}.values():
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """A URL naming a fresh database of each kind that several processes can share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared' / 'harness.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture(params=["sqlite", "postgres"])
def store_for(request):
    """Factory: `store_for(folder)` is the URL of a fresh database for that folder's run (the same
    URL on every call with the same folder): a SQLite file in it, or a new PostgreSQL database."""
    urls: dict[Path, str] = {}

    def url(folder: Path) -> str:
        if folder not in urls:
            if request.param == "sqlite":
                urls[folder] = f"sqlite:///{folder.absolute() / 'harness.db'}"
            else:
                urls[folder] = new_database(request.getfixturevalue("pg_server"))
        return urls[folder]

    return url



PAUSED_MID_SAVE = """
import os, signal, sys
from harness import new_run, open_store
from harness.store import Fenced, StoreError
store = open_store(sys.argv[1], lease_seconds=float(sys.argv[2]))
state = new_run("first holder", run_id="r1")
with store.claim("r1"):
    store.save(state)
    print("saved", flush=True)
    store.checkpoint = lambda where: os.kill(os.getpid(), signal.SIGSTOP)  # paused inside the save
    state.messages.append({"role": "assistant", "content": "written after waking up"})
    try:
        store.save(state)
        print("written", flush=True)
    except (Fenced, StoreError) as e:
        print("refused:", e, flush=True)
"""
"""A child that saves run r1, then SIGSTOPs itself inside its second save's transaction."""


def stopped(pid: int) -> bool:
    """Whether the kernel reports process `pid` stopped (SIGSTOP)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[-1].split()[0] == b"T"


def paused_mid_save(url: str, lease: float) -> subprocess.Popen:
    """`PAUSED_MID_SAVE` started on `url`, returned once it is stopped inside its second save."""
    child = subprocess.Popen([sys.executable, "-c", PAUSED_MID_SAVE, url, str(lease)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "saved\n", child.stderr.read()
    deadline = time.monotonic() + 30
    while not stopped(child.pid):
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.02)
    return child
