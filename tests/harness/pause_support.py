"""A writer paused inside a save by a real SIGSTOP, for the lease and contention tests."""

from __future__ import annotations

import subprocess
import sys
import time

PAUSED_MID_SAVE = """
import os, signal, sys
from harness import new_run, open_store
from harness.state import Intent
from harness.store import Fenced, StoreError
store = open_store(sys.argv[1], lease_seconds=float(sys.argv[2]))
state = new_run("first holder", run_id="r1")
with store.claim("r1"):
    store.save(state)
    print("saved", flush=True)
    store.checkpoint = lambda where: os.kill(os.getpid(), signal.SIGSTOP)  # paused inside the save
    state.messages.append({"role": "assistant", "content": "written after waking up"})
    # An intent: the save is a transaction of several statements on every engine (one that only
    # appends may be a single statement, with no transaction open to pause inside).
    state.intents["c1"] = Intent(call_id="c1", tool="write_file", args={"path": "a"})
    try:
        store.save(state)
        print("written", flush=True)
    except (Fenced, StoreError) as e:
        print("refused:", e, flush=True)
"""
"""A child that saves run r1, then SIGSTOPs itself inside its second save's transaction (one that
opens an intent)."""


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
