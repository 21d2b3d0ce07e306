"""Command adapters: the kit drives any process through environment variables and a job file,
serves its tools over MCP from the kit, and reads its outcome from its last JSON line; a command
that cannot serve as an agent is one usage line, never a traceback."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_exitkit_processes import _alive, _kill

from exitkit.__main__ import main
from exitkit.card import run_case
from exitkit.command import argv_of, describe
from exitkit.contract import Approve, Reject
from exitkit.mcp import CALLED, NOTIFIED
from exitkit.runner import Kit

AGENTS = Path(__file__).parent / "command_agents"


def command(script: str, *args: str) -> str:
    """The command line of a test agent, as a user would write it on the CLI."""
    return shlex.join([sys.executable, str(AGENTS / script), *args])


def on(kit: Kit, line: str) -> Kit:
    kit.commands[line] = argv_of(line)
    return kit


def test_describe_reads_the_name_and_the_limits_a_command_prints() -> None:
    who = describe(command("file_agent.py"), os.environ)
    assert (who.spec, who.name) == (command("file_agent.py"), "file agent, a command")
    assert who.limits == {"max_turns", "max_budget_usd", "approval", "cancel", "resume"}
    assert describe(command("probe.py"), os.environ).name == command("probe.py")  # no name given


@pytest.mark.parametrize(("line", "says"), [
    ("/no/such/agent --flag", "cannot start command '/no/such/agent --flag': No such file or directory"),
    (str(AGENTS / "odd.py"), "cannot start command"),  # a script without its interpreter: not executable
    ("'unbalanced", "does not split into words: No closing quotation"),
    (command("odd.py", "garbage"), "printed no JSON line with `limits`"),
    (command("odd.py", "fails"), "exited 3; its stderr: no config here\\x1b[2J\\x1b]0;owned\\x07"),
    # Node prints an uncaught error's message before its stack: the end of stderr alone loses it.
    (command("odd.py", "throws"), 'SyntaxError: "undefined" is not valid JSON'),
    (command("odd.py", "throws"), "Node.js v20.20.2"),
    (command("odd.py", "approval-only"), "declares 'approval' without 'resume'"),
    (command("odd.py", "unknown"), "declares unknown limits ['max_turn']"),
])
def test_a_command_that_cannot_describe_itself_is_one_usage_line(line: str, says: str, capsys,
                                                                 tmp_path: Path) -> None:
    assert main(["run", "--command", line, "--out", str(tmp_path / "card")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("exitkit: ") and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "card" / "report.md").exists()


def test_one_text_given_as_an_adapter_and_as_a_command_is_a_usage_error(capsys, tmp_path: Path) -> None:
    argv = ["run", "file_loop:FileLoop", "--command", "file_loop:FileLoop", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert capsys.readouterr().err == ("exitkit: 'file_loop:FileLoop' given both as an adapter spec and as "
                                       "a command\n")


def test_the_command_gets_the_job_in_its_environment_and_a_job_file_in_a_group_of_its_own(kit: Kit) -> None:
    line = command("probe.py")
    setup = kit.setup("destructive", max_turns=8, needs_approval=("delete_file",))
    seen = json.loads(on(kit, line).child(line, setup, "resume", Reject("keep it")).outcome.answer)
    env, job = seen["env"], seen["job"]
    assert env == {"EXITKIT_ACTION": "resume", "EXITKIT_JOB": env["EXITKIT_JOB"],
                   "EXITKIT_DECISION": '{"reject": "keep it"}', "OPENAI_BASE_URL": setup.base_url,
                   "OPENAI_API_KEY": job["api_key"], "EXITKIT_MCP_URL": job["mcp_url"],
                   "EXITKIT_STATE_DIR": str(setup.folder / "state")}
    assert Path(env["EXITKIT_JOB"]).parent == setup.folder
    assert job["action"] == "resume" and job["decision"] == {"reject": "keep it"}
    assert (job["base_url"], job["model"], job["state_dir"]) == (setup.base_url, "destructive",
                                                                 str(setup.folder / "state"))
    assert job["limits"] == {"max_turns": 8, "max_budget_usd": None, "needs_approval": ["delete_file"]}
    assert [t["name"] for t in job["tools"]] == ["list_files", "read_file", "delete_file", "scan_archive"]
    assert job["mcp_url"].startswith("http://127.0.0.1:") and job["mcp_url"].endswith("/mcp")
    assert job["prices"] == {"input_usd_per_m": 2.0, "output_usd_per_m": 12.0}
    assert job["stop_signal"] == "SIGINT" and job["system"] and job["task"]
    assert seen["cwd"] == os.getcwd() and seen["leads its group"] is True
    again = json.loads(kit.measure(line, setup).outcome.answer)
    assert again["env"]["EXITKIT_DECISION"] == "null" and again["job"]["action"] == "run"
    assert again["job"]["mcp_url"] != job["mcp_url"]  # a server per run, for that run only


def test_the_crash_case_kills_the_commands_whole_group_right_after_the_effect(kit: Kit) -> None:
    line = command("probe.py", "deletes")
    setup = kit.setup("destructive", needs_approval=("delete_file",))
    killed = on(kit, line).child(line, setup.but(crash_after_effect=True), decision=Approve())
    assert killed.returncode == -9
    assert killed.said() == "process ended without a result · killed (SIGKILL)"
    assert [(e.tool, e.event) for e in killed.events] == [("delete_file", CALLED), ("delete_file", "start"),
                                                          ("delete_file", "effect")]
    assert not (setup.sandbox / "notes.txt").exists()
    helper = setup.folder / "state" / "helper"
    assert _alive(helper, within_s=5) == []
    # Without the crash, the same call answers and the command prints its line.
    setup = kit.setup("destructive")
    assert kit.child(line, setup, decision=Approve()).outcome.answer == "deleted notes.txt"
    _kill(setup.folder / "state" / "helper")


def test_a_call_a_command_abandons_at_stop_is_left_running_not_cancelled_by_the_kit(kit: Kit) -> None:
    line = command("probe.py", "abandons")
    setup = kit.setup("slow", max_turns=5)
    run = on(kit, line).measure(line, setup, stop=("scan_archive", 0.2))
    assert run.outcome.status == "stopped" and run.stop_pressed is not None
    assert run.left_running == 1
    # The kit stopped the tools' server after the run: no cancellation of its own reads as the agent's.
    assert [(e.tool, e.event) for e in setup.ledger.events()] == [("scan_archive", CALLED),
                                                                  ("scan_archive", "start")]


def test_a_command_without_a_result_line_is_reported_with_its_exit_status_and_stderr(kit: Kit) -> None:
    line = command("odd.py", "silent")
    run = on(kit, line).measure(line, kit.setup("plan"))
    assert run.outcome.status == "process ended without a result"
    assert run.outcome.error == "exited 3: dying: the model is unreachable"
    assert run.returncode == 3


def test_a_command_that_dies_shows_the_start_and_the_end_of_its_stderr(kit: Kit) -> None:
    line = command("odd.py", "throws")
    run = on(kit, line).measure(line, kit.setup("plan"))
    assert run.outcome.status == "process ended without a result" and run.returncode == 1
    said = run.outcome.error
    assert said.startswith("exited 1: file:///agent/agent.ts:1\n") and said.endswith("Node.js v20.20.2")
    assert 'SyntaxError: "undefined" is not valid JSON' in said and " … " in said


def test_a_command_that_ignores_stop_is_killed_with_its_group_at_the_timeout(kit: Kit, tmp_path: Path,
                                                                               monkeypatch) -> None:
    helpers = tmp_path / "helpers"
    monkeypatch.setenv("EXITKIT_TEST_HELPERS", str(helpers))
    line = command("odd.py", "stubborn")
    quick = replace(on(kit, line), env=dict(os.environ), timeout_s=3.0)
    try:
        run = quick.measure(line, quick.setup("plan"))
        assert run.outcome.status == "kit timeout" and run.returncode == -1
        assert helpers.exists() and _alive(helpers, within_s=5) == []
    finally:
        _kill(helpers)


def test_a_card_mixes_python_adapters_and_commands_and_returns_though_a_command_left_a_helper(
        tmp_path: Path) -> None:
    """Hostile output too: 3 MB of junk, control sequences in its name, status and answer."""
    helpers = tmp_path / "helpers"
    env = os.environ | {"EXITKIT_TEST_HELPERS": str(helpers),
                        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent),
                                                      str(Path(__file__).parents[2]),
                                                      *filter(None, [os.environ.get("PYTHONPATH")])])}
    hostile = command("odd.py", "hostile")
    try:
        done = subprocess.run([sys.executable, "-m", "exitkit", "run", "file_loop:FileLoop", "--command",
                               hostile, "--only", "permanent_error", "--out", "card"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env=env, check=False)
        assert helpers.exists() and _alive(helpers, within_s=5) == []  # killed with the command's group
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the CLI waited for the helper holding the command's output") from e
    finally:
        _kill(helpers)
    assert done.returncode == 1, done.stderr[-2000:]  # the hostile one never ran the tool
    report = json.loads((tmp_path / "card" / "report.json").read_text())
    assert [a["spec"] for a in report["adapters"]] == ["file_loop:FileLoop", hostile]
    verdicts = {r["adapter"]: (r["verdict"], r["figures"]["caller gets"]) for r in report["results"]}
    assert verdicts["file loop"][0] == "pass"
    assert verdicts["odd hostile\x1b[2J\x1b]0;owned\x07\r"] == ("fail", "done\x1b[2J\x1b]0;owned\x07\r · red"
                                                               "\x1b[2J\x1b]0;owned\x07\r")
    card = (tmp_path / "card" / "report.md").read_text()
    assert "\x1b" not in card and "\x07" not in card and "odd hostile\\\\x1b\\[2J" in card
    assert "\x1b" not in done.stderr and "\x1b" not in done.stdout


def test_the_docs_show_the_minimal_command_agent_as_it_is() -> None:
    source = (AGENTS / "minimal.py").read_text()
    docs = (Path(__file__).parents[2] / "docs" / "exitkit.md").read_text()
    assert f"```python\n{source}```" in docs
    assert "exitkit" not in source  # nothing of the kit: the same steps in any language


def test_the_cancellation_case_says_what_carried_stop_to_a_commands_tool(kit: Kit) -> None:
    # A command's tools are always over MCP: the card says how its client's Stop reached the tool.
    line = command("minimal.py")
    result = run_case(on(kit, line), describe(line, os.environ), "cancellation", fast=True)
    assert result.verdict == "pass", result.summary
    assert result.figures["cancel reached the tool"] == NOTIFIED


def test_symlinks_a_command_plants_in_its_runs_folder_are_never_written_through(kit: Kit, tmp_path: Path,
                                                                                monkeypatch) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    monkeypatch.setenv("EXITKIT_TEST_VICTIM", str(victim))
    line = command("odd.py", "plants")
    planting = replace(on(kit, line), env=dict(os.environ))
    setup = planting.setup("destructive", needs_approval=("delete_file",))
    assert planting.measure(line, setup).outcome.status == "planted"
    # The next process of the same command: its job file and logs, its tools' log and ledger.
    assert planting.child(line, setup, decision=Approve()).outcome.status == "planted"
    assert victim.read_text() == "the user's own file\n"


def test_a_helper_the_command_detached_from_its_group_ends_with_its_run(kit: Kit, tmp_path: Path,
                                                                         monkeypatch) -> None:
    helpers = tmp_path / "helpers"
    monkeypatch.setenv("EXITKIT_TEST_HELPERS", str(helpers))
    line = command("odd.py", "detaches")
    detaching = replace(on(kit, line), env=dict(os.environ))
    try:
        assert detaching.measure(line, detaching.setup("plan")).outcome.status == "done"
        assert helpers.exists() and _alive(helpers, within_s=5) == []
    finally:
        _kill(helpers)
