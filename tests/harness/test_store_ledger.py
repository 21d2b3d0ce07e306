"""The tool ledger wins over a run restored from an older backup: a call the ledger shows done
is never started again unasked; the run stops in doubt and a person decides."""

import pytest

from harness import new_run, open_store
from harness.cli import main
from harness.state import Intent, ToolRun
from harness.store import LedgerConflict

RUN_COLUMNS = "run_id, head, status, turns, cost_usd, waiting_call, waiting_tool, updated_at"


def _backup(store, run_id: str) -> tuple[list[tuple], list[tuple]]:
    """The run's rows (`runs`, `run_items`) as a backup of those tables holds them."""
    with store._transaction(write=False) as tx:
        return (tx.fetchall(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)),
                tx.fetchall("SELECT run_id, field, seq, body FROM run_items WHERE run_id = ?", (run_id,)))


def _restore(store, run_id: str, backup: tuple[list[tuple], list[tuple]]) -> None:
    """Put the backup's rows back; the ledger (not in the backup) keeps what happened since."""
    runs, items = backup
    with store._transaction() as tx:
        tx.execute("DELETE FROM run_items WHERE run_id = ?", (run_id,))
        tx.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        tx.executemany(f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", runs)
        tx.executemany("INSERT INTO run_items (run_id, field, seq, body) VALUES (?, ?, ?, ?)", items)


def _ledger(store, run_id: str) -> list[tuple[str, str, int]]:
    return [(r["call_id"], r["state"], r["attempt"]) for r in store.ledger(run_id)]


@pytest.mark.parametrize("backup_taken", ["waiting for the approval", "approved, not yet started"])
def test_a_restored_backup_never_runs_a_done_call_again_the_run_stops_in_doubt(backup_taken, store_url,
                                                                              mock_url, tmp_path, capsys):
    argv = ["--store", store_url, "--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "d1"]) == 3
    if backup_taken == "approved, not yet started":
        assert main([*argv, "approve", "d1", "--no-resume"]) == 3
    store = open_store(store_url)
    try:
        backup = _backup(store, "d1")
        assert main([*argv, "resume" if backup_taken.startswith("approved") else "approve", "d1"]) == 0
        sandbox = tmp_path / "sandboxes" / "d1"
        assert not (sandbox / "access.log").exists() and _ledger(store, "d1") == [("c2", "done", 1)]
        (sandbox / "access.log").write_text("put back by hand\n")
        _restore(store, "d1", backup)
        capsys.readouterr()

        again = ["resume", "d1"] if backup_taken.startswith("approved") else ["approve", "d1"]
        assert main([*argv, *again]) == 3
        out = capsys.readouterr().out
        assert "IN DOUBT" in out, out
        assert (sandbox / "access.log").exists() and _ledger(store, "d1") == [("c2", "done", 1)]

        # Told, a person decides: approving the in-doubt call runs it again, on purpose.
        assert main([*argv, "approve", "d1"]) == 0
        assert not (sandbox / "access.log").exists() and _ledger(store, "d1")[0][:2] == ("c2", "done")
    finally:
        store.close()


def test_a_save_never_reopens_a_call_the_ledger_shows_done(store_url):
    first, second = open_store(store_url), open_store(store_url)
    try:
        s = new_run("t", run_id="r1")
        first.save(s)
        stale = second.load("r1")  # read before the call started
        s.intents["c1"] = Intent(call_id="c1", tool="delete_file", args={})
        first.save(s)
        s.intents.pop("c1")
        s.tool_runs.append(ToolRun(tool="delete_file", args={}, call_id="c1", ok=True, ms=1))
        first.save(s)
        stale.intents["c1"] = Intent(call_id="c1", tool="delete_file", args={})
        with pytest.raises(LedgerConflict, match="call 'c1' of run r1 is already done in the tool ledger"):
            second.save(stale)
        assert _ledger(first, "r1") == [("c1", "done", 1)]
    finally:
        first.close()
        second.close()
