"""One writer per run: the store's lease, the CLI's refusal (exit 4), compare-and-set verdicts.

The multi-process races themselves (approve ‖ approve, resume while running, …) are in
tests/reliability/test_races.py; here are the pieces they rest on.
"""

import os
import signal
import subprocess
import sys

import pytest

from harness import SQLiteStore, approve, new_run, reject
from harness.approvals import DecisionLost
from harness.cli import REFUSED, main
from harness.store import RunOwned

HOLD = """
import sys
from harness import SQLiteStore
with SQLiteStore.in_folder(sys.argv[1]).claim("r1"):
    print("claimed", flush=True)
    sys.stdin.readline()
"""


def _holder(directory) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "claimed\n"
    return child


def test_a_second_claim_is_refused_at_once_naming_the_holder(tmp_path):
    child = _holder(tmp_path)
    try:
        with pytest.raises(RunOwned, match=rf"owned by process {child.pid} .* since 20\d\d-.*retry") as info:
            with SQLiteStore.in_folder(tmp_path).claim("r1"):
                pass
        assert info.value.holder["pid"] == child.pid
    finally:
        child.communicate("\n")


def test_a_dead_owner_holds_nothing(tmp_path):
    child = _holder(tmp_path)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    with SQLiteStore.in_folder(tmp_path).claim("r1"):  # a gone process of this host holds no lease
        pass


def test_a_store_that_did_not_claim_the_run_may_not_save_it_while_another_owns_it(tmp_path):
    owner, other = SQLiteStore.in_folder(tmp_path), SQLiteStore.in_folder(tmp_path)
    state = new_run("t", run_id="r1")
    other.save(state)  # nobody owns it: the single-process Python API just works
    with owner.claim("r1"):
        owner.save(state)
        with pytest.raises(RunOwned):
            other.save(state)
        with pytest.raises(RunOwned):
            with other.claim("r1"):
                pass
    other.save(state)


def test_the_cli_refuses_a_run_another_process_owns_with_exit_4(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "r1"]) == 3
    child = _holder(tmp_path)
    try:
        for command in (["resume", "r1"], ["approve", "r1"], ["reject", "r1", "--reason", "no"],
                        ["run", "--run-id", "r1"]):
            assert main([*argv, *command]) == REFUSED == 4
            assert f"refused: run r1 is owned by process {child.pid}" in capsys.readouterr().err
    finally:
        child.communicate("\n")
    assert (tmp_path / "sandboxes" / "r1" / "access.log").exists()
    assert main([*argv, "approve", "r1"]) == 0  # free again: it goes through


def test_a_second_verdict_on_a_decided_call_loses_and_says_why(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "r1"]) == 3
    assert main([*argv, "approve", "r1", "c2", "--no-resume"]) == 3
    capsys.readouterr()
    assert main([*argv, "reject", "r1", "c2", "--reason", "no", "--no-resume"]) == REFUSED
    assert main([*argv, "approve", "r1", "c2", "--no-resume"]) == REFUSED
    err = capsys.readouterr().err
    assert err.count("is already approved as it reads now; this decision lost") == 2
    assert main([*argv, "resume", "r1"]) == 0
    capsys.readouterr()
    assert main([*argv, "reject", "r1", "c2", "--reason", "no"]) == REFUSED
    assert "already has a result" in capsys.readouterr().err
    state = SQLiteStore.in_folder(tmp_path).load("r1")
    assert not state.rejections and not (tmp_path / "sandboxes" / "r1" / "access.log").exists()


def test_approve_after_a_rejection_loses(drive, tmp_path):
    state = drive("destructive")
    reject(state, reason="keep it")
    with pytest.raises(DecisionLost, match="was already rejected \\('keep it'\\)"):
        approve(state, "c2")
