import json
import re
import signal
import subprocess
import sys

import pytest

from harness import FileStore
from harness.cli import main

SUMMARY = re.compile(
    r"^plan, cap 20    turns=3  tools=2  in=\d+  out=\d+  cost=\$0\.\d{6}  ms=\d+  status=completed$"
)


def test_run_prints_the_chapter_summary_line_and_the_answer(mock_url, tmp_path, capsys):
    assert main(["--state-dir", str(tmp_path), "--base-url", mock_url, "run", "--scenario", "plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert SUMMARY.match(lines[0]), lines[0]
    assert lines[1] == '   answer: "errors.log mentions a timeout: worker 7 timed out after 30000 ms."'


def test_approval_flow_across_processes(mock_url, tmp_path):
    common = [sys.executable, "-m", "harness", "--state-dir", str(tmp_path), "--base-url", mock_url]
    first = subprocess.run([*common, "run", "--scenario", "destructive", "--run-id", "d1"],
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 3
    assert 'interrupted / approval -> delete_file({"path": "access.log"})' in first.stdout
    second = subprocess.run([*common, "approve", "d1"], capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert "turns=3" in second.stdout and "Deleted access.log to free space." in second.stdout
    assert not (tmp_path / "sandboxes" / "d1" / "access.log").exists()


def test_ctrl_c_saves_the_run_as_cancelled_and_says_how_to_resume(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    child = subprocess.Popen(
        [sys.executable, "-m", "harness", *argv, "run", "--scenario", "slow", "--run-id", "s1",
         "--scan-seconds", "1.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    progress = child.stderr.readline()
    assert "progress: scanned 200 of 1200 files" in progress
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 3, err
    assert "interrupted / cancelled: user pressed Ctrl-C" in out
    assert "harness resume s1" in out
    assert FileStore(tmp_path).load("s1").status == "interrupted"
    assert main([*argv, "resume", "s1"]) == 0
    assert "status=completed" in capsys.readouterr().out


def test_show_prints_a_saved_run(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    main([*argv, "run", "--scenario", "runaway", "--max-turns", "3", "--run-id", "r1"])
    capsys.readouterr()
    assert main([*argv, "show", "r1", "--messages"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("runaway, cap 3  turns=3  tools=2")  # the third call is pending
    assert "tool runs: list_files, list_files" in out
    assert "pending: c2 list_files({})" in out
    assert json.loads(out.splitlines()[-1])["role"] == "assistant"


def test_a_corrupt_state_file_is_reported_and_left_alone(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["--state-dir", str(tmp_path), "resume", "bad"]) == 2
    assert "is not valid JSON" in capsys.readouterr().err
    assert (tmp_path / "bad.json").read_text() == "{not json"


def test_show_prints_a_run_saved_through_the_python_api(tmp_path, capsys):
    from harness import new_run

    FileStore(tmp_path).save(new_run("t", run_id="lib1"))
    assert main(["--state-dir", str(tmp_path), "show", "lib1"]) == 3
    assert capsys.readouterr().out.startswith("(not a CLI run)")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-0.5", "1e999", "lots"])
def test_run_refuses_a_budget_that_is_not_a_sum_of_money(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["--state-dir", str(tmp_path), "run", "--budget", value])
    assert exit_.value.code == 2 and "expected dollars" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "1.5", "lots"])
def test_run_refuses_a_turn_cap_that_is_not_a_count(tmp_path, capsys, value):
    with pytest.raises(SystemExit):
        main(["--state-dir", str(tmp_path), "run", "--max-turns", value])
    assert "whole number" in capsys.readouterr().err


def test_resume_can_lift_the_turn_cap_altogether(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "plan", "--max-turns", "1", "--run-id", "p1"]) == 3
    assert main([*argv, "resume", "p1", "--max-turns", "none"]) == 0
    assert "plan, cap none" in capsys.readouterr().out.splitlines()[-3]
