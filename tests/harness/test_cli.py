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


def test_a_python_api_run_says_how_to_continue_it_and_the_cli_refuses_clearly(mock_url, tmp_path, capsys):
    import asyncio

    from harness import ModelClient, OpenAIChat, new_run, run
    from harness.chapter import chapter_tools, make_sandbox

    async def go():
        async with ModelClient(mock_url) as client:
            return await run(new_run("t", run_id="pyd"), model=OpenAIChat("destructive", client=client),
                             tools=chapter_tools(make_sandbox(tmp_path / "sb")), store=FileStore(tmp_path))

    assert asyncio.run(go()).status == "interrupted"
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "show", "pyd"]) == 3
    out = capsys.readouterr().out
    assert "continue it from Python" in out and "harness approve" not in out
    assert main([*argv, "approve", "pyd"]) == 2
    assert "was started from Python" in capsys.readouterr().err


def test_show_lists_no_pending_call_for_a_final_run(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "denied", "--errors", "fatal", "--run-id", "f1"]) == 1
    capsys.readouterr()
    main([*argv, "show", "f1"])
    assert "pending:" not in capsys.readouterr().out


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-0.5", "1e999", "lots"])
def test_run_refuses_a_budget_that_is_not_a_sum_of_money(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["--state-dir", str(tmp_path), "run", "--budget", value])
    assert exit_.value.code == 2 and "number" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "1.5", "lots"])
def test_run_refuses_a_turn_cap_that_is_not_a_count(tmp_path, capsys, value):
    with pytest.raises(SystemExit):
        main(["--state-dir", str(tmp_path), "run", "--max-turns", value])
    err = capsys.readouterr().err
    assert "not a whole number" in err or "is negative" in err


def test_resume_can_lift_the_turn_cap_altogether(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "plan", "--max-turns", "1", "--run-id", "p1"]) == 3
    assert main([*argv, "resume", "p1", "--max-turns", "none"]) == 0
    assert "plan, cap none" in capsys.readouterr().out.splitlines()[-3]


DAMAGE = {
    "cost_usd negative": ({"cost_usd": -1000}, "cost_usd"),
    "cost_usd NaN": ({"cost_usd": float("nan")}, "cost_usd"),
    "turns of 400 digits": ({"turns": 10**400}, "turns"),
    "usage of 400 digits": ({"usage": {"prompt_tokens": 10**400, "completion_tokens": 0}},
                            "usage.prompt_tokens"),
    "no messages": ({"messages": [], "stop": {"type": "completed"}}, "messages"),
    "messages not a list": ({"messages": {"role": "user"}}, "messages"),
    "empty call id": ({"approved": [{"call_id": "", "tool_name": "delete_file", "digest": "x"}]},
                      "approved[0].call_id"),
    "approval stop without id": ({"stop": {"type": "approval", "call_id": "", "tool_name": "t", "args": {}}},
                                 "stop.call_id"),
    "tool message without id": (
        {"messages": [{"role": "user", "content": "t"}, {"role": "tool", "content": "x"}]}, "messages[1]"),
    "content a number": ({"messages": [{"role": "user", "content": 5}]}, "messages[0]"),
    "cache past the transcript": ({"cache": {"read_file:{}": 99}}, "cache"),
    "intent under another id": ({"intents": {"c1": {"call_id": "c2", "tool": "delete_file", "args": {}}}},
                                "intents['c1']"),
    "rejections not a list": ({"rejections": "c1"}, "rejections"),
    "settings damaged": ({"meta": {"settings": {"max_turns": "many"}}}, "settings"),
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_state_file_is_a_clear_error_never_a_traceback(name, mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "plan", "--run-id", "r1", "--max-turns", "1"]) == 3
    store = FileStore(tmp_path)
    data = json.loads(store.path("r1").read_text())
    data.pop("journal_seq", None)
    changes, field = DAMAGE[name]
    data.update(changes)
    store.path("r1").write_text(json.dumps(data))
    store.journal_path("r1").write_bytes(b"")
    before = store.path("r1").read_bytes()
    capsys.readouterr()
    for command in (["show", "r1", "--messages"], ["resume", "r1"], ["approve", "r1", "c1"]):
        assert main([*argv, *command]) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("harness: ") and field in err and "Traceback" not in err, err
    assert store.path("r1").read_bytes() == before
