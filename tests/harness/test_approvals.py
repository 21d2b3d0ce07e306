"""Approval stops the run and returns control; the verdict may come from another process."""

import pytest

from harness import SQLiteStore, approve, reject
from harness.state import Approval

DELETED = "Deleted access.log to free space."
DECLINED = "I did not delete anything: you declined the deletion."


def _stopped(drive, tmp_path):
    store = SQLiteStore.in_folder(tmp_path / "state")
    s = drive("destructive", store=store)
    assert (s.status, s.turns) == ("interrupted", 2)
    assert s.interruption == Approval(call_id="c2", tool_name="delete_file", args={"path": "access.log"})
    return store, s.run_id


def test_approve_runs_the_call_and_finishes(drive, tmp_path, sandbox):
    store, rid = _stopped(drive, tmp_path)
    assert (sandbox / "access.log").exists()  # nothing deleted while waiting
    s = store.load(rid)  # as another process would, hours later
    assert approve(s) == "c2"
    s = drive("destructive", state=s, store=store)
    assert (s.status, s.turns, s.answer) == ("completed", 3, DELETED)
    assert not (sandbox / "access.log").exists()
    assert [r.tool for r in s.tool_runs] == ["list_files", "delete_file"]


def test_reject_with_a_reason_is_written_into_the_transcript(drive, tmp_path, sandbox):
    store, rid = _stopped(drive, tmp_path)
    s = store.load(rid)
    reject(s, reason="the user declined the deletion")
    assert s.messages[-1]["content"] == "Rejected by the user: the user declined the deletion"
    s = drive("destructive", state=s, store=store)
    assert (s.status, s.turns, s.answer) == ("completed", 3, DECLINED)
    assert (sandbox / "access.log").exists()


def test_an_empty_rejection_makes_the_agent_lie(drive, tmp_path, sandbox):
    store, rid = _stopped(drive, tmp_path)
    s = store.load(rid)
    with pytest.raises(ValueError, match="needs a reason"):
        reject(s, reason="")
    reject(s, reason="", unsafe_empty=True)
    s = drive("destructive", state=s, store=store)
    assert s.answer == DELETED  # the report says deleted…
    assert (sandbox / "access.log").exists()  # …though nothing was


def test_unapproved_run_stops_again_at_the_same_call(drive, tmp_path):
    store, rid = _stopped(drive, tmp_path)
    s = drive("destructive", state=store.load(rid))
    assert s.turns == 2 and s.interruption.call_id == "c2"


def test_verdict_on_a_call_that_is_not_pending_is_refused(drive, tmp_path):
    store, rid = _stopped(drive, tmp_path)
    s = store.load(rid)
    with pytest.raises(ValueError, match="'c9' is not pending.*pending: c2"):
        approve(s, "c9")


def test_auto_approve_names_the_tools_that_need_no_person(drive, sandbox):
    s = drive("destructive", auto_approve={"delete_file"})
    assert s.answer == DELETED and not (sandbox / "access.log").exists()


def test_an_approval_does_not_cover_the_call_once_its_saved_arguments_change(mock_url, tmp_path, capsys):
    """Approve access.log with --no-resume, then someone edits the saved call to errors.log."""
    from harness.cli import main
    from harness.trace import read_jsonl

    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "r1"]) == 3
    assert main([*argv, "approve", "r1", "c2", "--no-resume"]) == 3
    store = SQLiteStore.in_folder(tmp_path)
    s = store.load("r1")
    (edited,) = [c for c in s.messages[-1]["tool_calls"] if c["id"] == "c2"]
    edited["function"]["arguments"] = '{"path": "errors.log"}'
    SQLiteStore.in_folder(tmp_path).save(s)
    assert main([*argv, "resume", "r1"]) == 3  # a fresh decision, not the old yes
    s = store.load("r1")
    assert s.interruption == Approval(call_id="c2", tool_name="delete_file", args={"path": "errors.log"})
    sandbox = tmp_path / "sandboxes" / "r1"
    assert (sandbox / "errors.log").exists() and (sandbox / "access.log").exists()
    events = read_jsonl(tmp_path / "traces" / "r1.jsonl")
    assert not [e for e in events if e["type"] == "tool_start" and e["toolName"] == "delete_file"]


def test_only_a_pending_call_of_this_run_can_be_decided(mock_url, tmp_path, capsys):
    from harness.cli import main

    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "r1"]) == 3
    capsys.readouterr()
    assert main([*argv, "approve", "r1", "c9"]) == 2
    assert "call 'c9' is not pending in run r1; pending: c2" in capsys.readouterr().err
    assert main([*argv, "reject", "r1", "c1", "--reason", "no"]) == 4  # c1 (list_files) already ran
    assert "'c1' of run r1 already has a result" in capsys.readouterr().err
    assert (tmp_path / "sandboxes" / "r1" / "access.log").exists()
