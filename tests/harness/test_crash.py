"""Process death: a real child process SIGKILLed at an exact checkpoint, resumed by another."""

import os
import signal
import subprocess
import sys

import pytest

from harness import SQLiteStore
from harness.cli import main
from harness.state import Approval
from harness.trace import read_jsonl

pytestmark = pytest.mark.usefixtures("each_durability")  # what a killed process loses is the same at both

# Runs the CLI with a checkpoint hook that, once the given sequence of checkpoint names has been
# seen in order, announces itself on stdout and blocks until the parent kills it.
CHILD = r"""
import sys
from harness.cli import main
sequence, seen = sys.argv[1].split(","), [0]
def hook(name):
    if name == sequence[seen[0]]:
        seen[0] += 1
        if seen[0] == len(sequence):
            print("CHECKPOINT", name, flush=True)
            sys.stdin.read()
sys.exit(main(sys.argv[2:], checkpoint=hook))
"""


def _kill_at(sequence: list[str], argv: list[str]) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, ",".join(sequence), *argv],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = child.stdout.readline()
    if not line.startswith("CHECKPOINT"):
        child.kill()
        _, err = child.communicate()
        pytest.fail(f"child never reached {sequence}: {line!r} {err}")
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL


def _cli(*argv: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "harness", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_killed_after_turn_two_resumes_in_a_new_process_with_the_same_bill(
    mock_url, tmp_path, capsys
):
    common = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    run = ["run", "--scenario", "plan", "--run-id", "k1"]
    _kill_at(["after_tool_result", "after_tool_result"], [*common, *run])
    store = SQLiteStore.in_folder(tmp_path)
    died = store.load("k1")
    assert (died.status, died.turns, len(died.messages)) == ("running", 2, 6)
    runs = [(r.tool, r.args) for r in died.tool_runs]
    assert runs == [("list_files", {}), ("read_file", {"path": "errors.log"})]

    resumed = _cli(*common, "resume", "k1")
    assert resumed.returncode == 0, resumed.stderr
    assert "turns=3  tools=2" in resumed.stdout and "status=completed" in resumed.stdout

    assert main([*common, "run", "--scenario", "plan", "--run-id", "u1"]) == 0
    capsys.readouterr()
    done, straight = store.load("k1"), store.load("u1")
    assert done.turns == 3 and done.cost_usd == pytest.approx(straight.cost_usd, abs=1e-12)
    assert [(r.tool, r.args) for r in done.tool_runs] == [(r.tool, r.args) for r in straight.tool_runs]
    events = read_jsonl(tmp_path / "traces" / "k1.jsonl")  # two processes, one query
    assert [e["type"] for e in events].count("tool_start") == 2
    assert [e["turn"] for e in events if e["type"] == "turn"] == [1, 2, 3]


def test_killed_mid_save_leaves_the_previous_version_and_resumes(mock_url, tmp_path):
    common = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    run = ["run", "--scenario", "plan", "--run-id", "k3"]
    # inside the transaction saving turn 2 (its reply and read_file's result, one commit), before it commits
    _kill_at(["after_model_reply", "after_model_reply", "mid_save"], [*common, *run])
    died = SQLiteStore.in_folder(tmp_path).load("k3")
    assert (died.turns, len(died.tool_runs), len(died.messages)) == (1, 1, 4)  # turn 1, whole
    assert SQLiteStore.in_folder(tmp_path).run_ids() == ["k3"]
    resumed = _cli(*common, "resume", "k3")
    assert resumed.returncode == 0 and "turns=3  tools=2" in resumed.stdout


def test_killed_between_a_writes_intent_and_its_result_resumes_in_doubt(mock_url, tmp_path):
    common = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    run = ["run", "--scenario", "double_delete", "--run-id", "k2", "--auto-approve", "delete_file"]
    _kill_at(["after_intent", "before_save"], [*common, *run])  # the delete ran; its result was not saved
    assert not (tmp_path / "sandboxes" / "k2" / "access.log").exists()
    died = SQLiteStore.in_folder(tmp_path).load("k2")
    assert list(died.intents) == ["c1"] and died.tool_runs == []

    resumed = _cli(*common, "resume", "k2")
    assert resumed.returncode == 3, resumed.stderr
    assert "IN DOUBT" in resumed.stdout
    s = SQLiteStore.in_folder(tmp_path).load("k2")
    assert s.interruption == Approval(call_id="c1", tool_name="delete_file", args={"path": "access.log"},
                                      in_doubt=True)
    starts = [e for e in read_jsonl(tmp_path / "traces" / "k2.jsonl") if e["type"] == "tool_start"]
    assert [e["callId"] for e in starts] == ["c1"]  # not run a second time

    decided = _cli(*common, "reject", "k2", "c1", "--reason", "it was already deleted")
    assert decided.returncode == 0, decided.stderr
    s = SQLiteStore.in_folder(tmp_path).load("k2")
    assert s.answer == "Done: access.log is deleted."
    assert [(r.call_id, r.ok) for r in s.tool_runs] == [("c2", False)]  # c1 never re-run
