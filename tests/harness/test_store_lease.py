"""One writer per run across processes and hosts: lease expiry, fencing, the tool ledger.

Real processes, a real SIGSTOP: a holder paused past its lease is taken over by another, and
when it wakes, every write it tries is refused (`Fenced`) and nothing of it lands.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from pause_support import PAUSED_MID_SAVE, stopped

from harness import ToolContext, new_run, open_store
from harness.cancel import Cancel
from harness.state import Intent, ToolRun
from harness.store import Fenced, LedgerConflict, RunOwned

LEASE = 0.5
"""Short, so each takeover waits little: every check that the lease still holds comes right after it
is taken or renewed."""
HOLDER = """
import sys
import threading
from harness import new_run, open_store
from harness.store import Fenced
store = open_store(sys.argv[1], lease_seconds=float(sys.argv[2]))
state = new_run("first holder", run_id="r1")
with store.claim("r1"):
    store.save(state)
    print("saved", flush=True)
    sys.stdin.readline()
    state.messages.append({"role": "assistant", "content": "written after waking up"})
    try:
        store.save(state)
        print("written", flush=True)
    except Fenced as e:
        print("fenced:", e, flush=True)
"""


def _wait_until_free(store, run_id: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while (lease := store.lease(run_id)) and lease["held"]:
        assert time.monotonic() < deadline, lease
        time.sleep(0.05)


def test_a_holder_paused_past_its_lease_is_taken_over_and_fenced_when_it_wakes(store_url):
    child = subprocess.Popen([sys.executable, "-c", HOLDER, store_url, str(LEASE)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = open_store(store_url, lease_seconds=LEASE)
    try:
        assert child.stdout.readline() == "saved\n"
        with pytest.raises(RunOwned, match=f"owned by process {child.pid}"):
            with store.claim("r1"):
                pass
        os.kill(child.pid, signal.SIGSTOP)  # a GC pause, a partition: alive, silent
        _wait_until_free(store, "r1")
        with store.claim("r1"):
            taken = store.load("r1")
            taken.messages.append({"role": "assistant", "content": "the new owner's turn"})
            store.save(taken)
            os.kill(child.pid, signal.SIGCONT)
            out, err = child.communicate("go\n", timeout=60)
            assert out.startswith("fenced: run r1: this process held it at epoch 1"), out + err
            assert "epoch 2" in out
        assert store.load("r1").messages[-1]["content"] == "the new owner's turn"
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        store.close()


def test_a_killed_holder_on_this_host_releases_the_run_at_once(store_url):
    child = subprocess.Popen([sys.executable, "-c", HOLDER, store_url, "600"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "saved\n"
    child.kill()
    child.communicate()
    store = open_store(store_url)
    try:
        with store.claim("r1"):  # a 600 s lease, yet free: its holder is gone
            assert store.lease("r1")["epoch"] == 2
    finally:
        store.close()


def test_a_holder_on_another_host_is_waited_out_then_taken_over(store_url):
    store = open_store(store_url, lease_seconds=LEASE)
    try:
        with store._transaction() as tx:
            holder = json.dumps({"pid": 1, "host": "worker-elsewhere", "since": time.time()})
            tx.execute("INSERT INTO leases (run_id, epoch, owner, holder, until) VALUES (?, 7, 'x', ?, ?)",
                       ("r1", holder, tx.now() + LEASE))
        with pytest.raises(RunOwned, match="process 1 on worker-elsewhere"):
            with store.claim("r1"):
                pass
        _wait_until_free(store, "r1")
        with store.claim("r1"):
            assert store.lease("r1")["epoch"] == 8
    finally:
        store.close()


def test_the_ledger_opens_a_row_with_the_intent_and_closes_it_with_the_result(make_store):
    store = make_store()
    s = new_run("t", run_id="r1")
    s.intents["c1"] = Intent(call_id="c1", tool="delete_file", args={"path": "access.log"})
    store.save(s)
    assert store.ledger("r1") == [{"call_id": "c1", "tool": "delete_file", "state": "intent", "attempt": 1,
                                   "epoch": 0}]
    s.intents.pop("c1")
    s.tool_runs.append(ToolRun(tool="delete_file", args={"path": "access.log"}, call_id="c1", ok=True, ms=1))
    store.save(s)
    assert [r["state"] for r in store.ledger("r1")] == ["done"]


def test_a_second_writer_cannot_open_an_intent_another_left_open(store_url):
    first, second = open_store(store_url), open_store(store_url)
    s = new_run("t", run_id="r1")
    first.save(s)
    stale = second.load("r1")  # read before the first writer started the call
    s.intents["c1"] = Intent(call_id="c1", tool="delete_file", args={})
    first.save(s)
    stale.intents["c1"] = Intent(call_id="c1", tool="delete_file", args={})
    stale.turns = 99
    with pytest.raises(LedgerConflict, match="call 'c1' of run r1 is already started"):
        second.save(stale)
    assert first.load("r1").turns == 0  # the refused save wrote nothing


def test_every_tool_gets_the_calls_idempotency_key():
    ctx = ToolContext(run_id="r1", call_id="c2", cancel=Cancel(), progress=lambda _: None)
    assert ctx.idempotency_key == "r1:c2"


def test_a_fenced_save_raises_in_process_too(store_url):
    store, other = open_store(store_url), open_store(store_url)
    s = new_run("t", run_id="r1")
    with store.claim("r1"):
        store.save(s)
        with other._transaction() as tx:  # as if the lease expired and another host took it
            tx.execute("UPDATE leases SET epoch = epoch + 1, owner = 'other' WHERE run_id = ?", ("r1",))
        s.turns = 5
        with pytest.raises(Fenced):
            store.save(s)
    assert other.load("r1").turns == 0


@pytest.mark.slow
def test_a_holder_paused_inside_a_save_is_taken_over_after_its_lease_not_waited_on_for_ever(pg_url):
    """A paused holder's open transaction must not hold the run's rows past its lease."""
    child = subprocess.Popen([sys.executable, "-c", PAUSED_MID_SAVE, pg_url, str(LEASE)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = open_store(pg_url, lease_seconds=LEASE)
    outcome: list[object] = []
    try:
        assert child.stdout.readline() == "saved\n"
        deadline = time.monotonic() + 30
        while not stopped(child.pid):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.02)

        def take() -> None:
            deadline = time.monotonic() + 20
            while True:
                try:
                    with store.claim("r1"):
                        taken = store.load("r1")
                        taken.messages.append({"role": "assistant", "content": "the new owner's turn"})
                        store.save(taken)
                    outcome.append("taken")
                    return
                except RunOwned:
                    if time.monotonic() > deadline:
                        outcome.append("still owned")
                        return
                    time.sleep(0.05)

        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        taker.join(timeout=30)
        blocked = taker.is_alive()
        os.kill(child.pid, signal.SIGCONT)  # frees a blocked taker too, so the test never hangs
        out, err = child.communicate(timeout=60)
        taker.join(timeout=30)
        assert not blocked, "the takeover waited on the paused holder's transaction"
        assert outcome == ["taken"]
        assert out.startswith("refused:"), out + err
        assert store.load("r1").messages[-1]["content"] == "the new owner's turn"
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        store.close()


def test_a_holders_command_line_never_carries_the_store_password(pg_url, tmp_path, capsys):
    """The lease records its holder's command line; a `--store` URL in it is masked when written
    and when read, so a refusal, `lease()` and `show --json` never print the password."""
    from harness.cli import REFUSED, main

    url = pg_url.replace("postgresql://harness@", "postgresql://harness:s3cret@")
    child = subprocess.Popen([sys.executable, "-c", HOLDER, url, "600", "--store", url, f"--store={url}"],
                             stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = open_store(url)
    try:
        assert child.stdout.readline() == "saved\n", child.stderr.read()
        with pytest.raises(RunOwned) as refused:
            with store.claim("r1"):
                pass
        assert "--store" in str(refused.value) and "s3cret" not in str(refused.value)
        assert "s3cret" not in json.dumps(store.lease("r1"))
        with store._transaction() as tx:
            assert "s3cret" not in tx.fetchall("SELECT holder FROM leases")[0][0]
        assert main(["--store", url, "show", "r1", "--json"]) in (0, 3)
        assert main(["--store", url, "approve", "r1"]) == REFUSED
        captured = capsys.readouterr()
        assert "s3cret" not in captured.out + captured.err
    finally:
        child.kill()
        child.communicate()
        store.close()


class _Crash(BaseException):
    """The process dying right after a tool's effect, before its result is saved."""


class _KeyedDelete:
    """A write tool whose effect is a line naming the idempotency key it was handed."""

    name, description, read_only, needs_approval = "delete_file", "delete a file", False, True
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def run(self, args, ctx) -> str:
        self.keys.append(ctx.idempotency_key)
        return "deleted"


def test_a_call_re_run_after_a_crash_gets_the_same_idempotency_key(drive):
    """The loop hands each call `<run id>:<call id>`, and a call decided again after a crash
    between its effect and its result is re-run under the very same key."""
    from harness import MemoryStore, approve
    from harness.state import Approval

    store, tool = MemoryStore(), _KeyedDelete()
    seen: list[str] = []

    def crash_after_the_effect(name: str) -> None:
        seen.append(name)
        if name == "before_save" and "after_intent" in seen:
            raise _Crash

    state = new_run("delete access.log", run_id="k1")
    with pytest.raises(_Crash):
        drive("double_delete", state=state, tools=[tool], store=store,
              auto_approve=frozenset({"delete_file"}), checkpoint=crash_after_the_effect)
    assert tool.keys == ["k1:c1"]
    resumed = drive("double_delete", state=store.load("k1"), tools=[tool], store=store)
    assert isinstance(resumed.stop, Approval) and resumed.stop.in_doubt and tool.keys == ["k1:c1"]
    approve(resumed, "c1")
    drive("double_delete", state=resumed, tools=[tool], store=store)
    assert tool.keys == ["k1:c1", "k1:c1"]
