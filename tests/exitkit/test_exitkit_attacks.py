"""Agents written to fool the kit (tests/exitkit/attack_loops.py): each must get the verdict the
written criteria give it, read at the provider and the ledger, never what it says of itself."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from exitkit.runner import Kit
from exitkit.verdict import Result

HERE = Path(__file__).parent  # as the conftest beside it: "conftest" names several modules
CHILD_ENV = {"PYTHONPATH": os.pathsep.join((str(HERE), str(HERE.parent.parent))), "PATH": "/usr/bin:/bin"}
"""A child process's environment: the attack loops importable, and nothing else of ours inherited."""

Judge = Callable[[str, str], Result]


def test_a_run_that_raises_before_its_first_request_does_not_pass_the_budget(judge: Judge) -> None:
    result = judge("attack_loops:RaisesAtOnce", "budget")
    assert result.figures["requests"] == 0
    assert result.verdict == "warn", result.summary
    assert result.summary.startswith("stopped before the budget · 0 requests")


def test_a_run_that_asks_for_another_model_is_an_error_not_judged_on_the_wrong_scenario(judge: Judge) -> None:
    result = judge("attack_loops:OwnModel", "turn_cap")
    assert result.verdict == "error", result.summary
    assert "'plan'" in result.summary and "'runaway'" in result.summary


def test_a_run_that_picks_its_scenario_in_the_url_path_is_an_error(judge: Judge) -> None:
    result = judge("attack_loops:OwnPath", "turn_cap")
    assert result.verdict == "error", result.summary
    assert "/o/scenario=plan/v1/chat/completions" in result.summary


def test_the_progress_line_shows_control_characters_an_agent_carries_escaped_not_raw() -> None:
    from exitkit.card import check

    lines: list[str] = []
    check(["attack_loops:Named"], cases=["tool_error"], log=lines.append)
    [line] = lines
    assert not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in line), repr(line)
    assert line.startswith("evil\\x1b[2J\\x1b]0;pwned\\x07\\rname · tool error: PASS")


PLAIN_NONE = ["run", "exitkit.adapters.plain:PlainLoop", "--only", "crash"]
"""A card that runs nothing: the plain loop has no approval, so crash is 'none exists' at once."""


def test_an_out_that_is_a_file_is_a_usage_error_before_any_case_runs(tmp_path, capsys) -> None:
    from exitkit.__main__ import main

    taken = tmp_path / "taken"
    taken.write_text("mine")
    assert main([*PLAIN_NONE, "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("exitkit: --out ") and err.count("\n") == 1, err
    assert "· crash" not in err  # refused before the cases ran, not after
    assert taken.read_text() == "mine"


def test_the_report_files_get_the_permissions_the_umask_gives_a_new_file(tmp_path) -> None:
    # Written via a temporary file and a rename: the card stays readable by whoever reads a CI's artifacts.
    from exitkit.report import write

    umask = os.umask(0o022)
    try:
        written = write([], [], tmp_path / "card")
    finally:
        os.umask(umask)
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in written} == {
        path.name: 0o644 for path in written}


def test_the_report_replaces_a_symlink_in_out_and_never_writes_through_it(tmp_path) -> None:
    from exitkit.__main__ import main

    outside, out = tmp_path / "outside.txt", tmp_path / "card"
    outside.write_text("not the kit's")
    out.mkdir()
    for name in ("report.json", "report.md"):
        (out / name).symlink_to(outside)
    assert main([*PLAIN_NONE, "--out", str(out)]) == 0
    assert outside.read_text() == "not the kit's"
    assert not (out / "report.json").is_symlink() and '"schema"' in (out / "report.json").read_text()
    assert not (out / "report.md").is_symlink()


@pytest.mark.parametrize(("spec", "says"), [
    ("attack_loops:NeedsArguments", "making 'attack_loops:NeedsArguments' raised TypeError: "),
    ("exitkit:Outcome", "making 'exitkit:Outcome' raised TypeError: "),
    ("attack_loops:BrokenLimits", "reading adapter 'attack_loops:BrokenLimits' raised KeyError: 'LIMITS'"),
])
def test_an_adapter_that_cannot_be_made_or_read_is_one_usage_line_not_a_traceback(spec, says, capsys) -> None:
    from exitkit.__main__ import main

    assert main(["run", spec, "--only", "crash", "--out", "unused"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"exitkit: {says}") and err.count("\n") == 1, err


KIT_TIMEOUT = """
import sys, tempfile
from dataclasses import replace
from pathlib import Path
from exitkit.card import run_case
from exitkit.loader import declared, load
from exitkit.runner import Kit
who = declared(sys.argv[1], load(sys.argv[1]))
with tempfile.TemporaryDirectory() as tmp, Kit.serve(Path(tmp)) as kit:
    result = run_case(replace(kit, timeout_s=2.0), who, "turn_cap")
print(result.verdict, result.figures["caller gets"], sep="\\n")
"""


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["attack_loops:BlocksForever", "attack_loops:RetriesSynchronously",
                                  "attack_loops:NeverReturns", "attack_loops:SlowToCancel"])
def test_a_run_that_never_returns_is_timed_out_and_reported_even_when_it_blocks_the_event_loop(spec) -> None:
    done = subprocess.run([sys.executable, "-c", KIT_TIMEOUT, spec], capture_output=True, text=True,
                          timeout=60, env=CHILD_ENV, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    verdict, said = done.stdout.splitlines()[-2:]
    assert verdict == "fail" and said.startswith("kit timeout · "), done.stdout


def test_a_timer_the_caller_set_is_still_running_after_a_run() -> None:
    # pytest-timeout and others arm ITIMER_REAL: a run must leave their alarm as it found it.
    armed = ("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
             "signal.setitimer(signal.ITIMER_REAL, 600)\n")
    script = armed + KIT_TIMEOUT + "print(signal.getitimer(signal.ITIMER_REAL)[0])\n"
    done = subprocess.run([sys.executable, "-c", script, "attack_loops:RaisesAtOnce"], capture_output=True,
                          text=True, timeout=60, env=CHILD_ENV, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0 < float(done.stdout.splitlines()[-1]) <= 600, done.stdout


def test_a_thread_a_run_left_asking_the_model_counts_in_no_later_case() -> None:
    from exitkit.card import check

    _, (denied, cap) = check(["attack_loops:LeavesAThread"], cases=["permanent_error", "turn_cap"],
                             log=lambda line: None)
    assert denied.verdict == "pass", denied.summary
    assert (cap.verdict, cap.figures["requests"]) == ("pass", 8), cap.summary


def test_report_md_shows_control_characters_an_agent_carries_escaped_not_raw() -> None:
    from exitkit.contract import Declared
    from exitkit.report import markdown

    evil = "evil\x1b[2J\x1b]0;pwned\x07\x9b31m\x00"
    who = Declared(spec="m:A", name=evil, limits=frozenset())
    result = Result(case="tool_error", adapter=evil, verdict="fail", summary=f"no recovery · sent {evil!s}",
                    figures={"caller gets": evil})
    text = markdown([who], [result], title="t", command="c", chart=None)
    assert not [c for c in text if (ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160]
    assert "evil\\\\x1b\\[2J" in text  # shown, as an escape (its backslash and bracket escaped for markdown)


def test_a_failed_case_in_pytest_shows_control_characters_escaped_not_raw() -> None:
    from exitkit.pytest_plugin import failure_text

    evil = "evil\x1b[2J\x07\x9b31m"
    result = Result(case="tool_error", adapter=evil, verdict="fail", summary=f"no recovery · sent {evil}",
                    figures={"caller gets": evil}, evidence={"requests": [{"reply": evil}]})
    text = failure_text(result)
    assert not [c for c in text if (ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160]
    assert text.startswith("evil\\x1b[2J\\x07\\x9b31m · tool_error: FAIL")


def test_a_run_that_holds_its_cap_but_never_returns_to_its_caller_fails(kit) -> None:
    from dataclasses import replace

    from exitkit.card import run_case
    from exitkit.loader import declared, load
    from exitkit.verdict import CRITERIA

    spec = "attack_loops:HangsAtTheCap"
    # Long enough for a new process to send its eight requests, on a busy machine too.
    result = run_case(replace(kit, timeout_s=15.0), declared(spec, load(spec)), "turn_cap")
    assert result.figures["requests"] == 8 and result.figures["caller gets"].startswith("kit timeout")
    assert result.verdict == "fail", result.summary
    assert result.summary.startswith("never returned (no result within 15 s) · cap held · 8 requests")
    assert "never returned to its caller: **fail**" in CRITERIA["turn_cap"]


def test_a_resume_that_leaves_the_cancelled_call_without_its_result_fails_cancellation(judge: Judge) -> None:
    result = judge("attack_loops:DanglesAfterStop", "cancellation")
    assert result.figures["next request status"] == 400
    assert result.figures["dangling tool calls"] == ["c1"]
    assert result.verdict == "fail"
    assert result.summary.endswith("next request invalid (400)")


def test_the_pytest_entry_refuses_an_out_that_is_a_file_before_any_case_runs(tmp_path) -> None:
    (tmp_path / "taken").write_text("mine")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--exitkit",
                           "exitkit.adapters.plain:PlainLoop", "--exitkit-out", "taken"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
                          env=CHILD_ENV)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    assert "--exitkit-out 'taken': " in done.stderr and "is not a folder" in done.stderr
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert (tmp_path / "taken").read_text() == "mine"


def test_a_run_with_no_request_has_no_last_call_to_have_run(judge: Judge) -> None:
    result = judge("attack_loops:RaisesAtOnce", "turn_cap")
    assert (result.verdict, result.figures["requests"]) == ("warn", 0)
    assert result.figures["last call"] == "none: no request"
    assert result.summary.startswith("stopped early · 0 requests · last call none: no request")


def test_a_failing_call_answered_from_a_cache_until_the_cap_is_counted_at_the_provider(judge: Judge) -> None:
    result = judge("attack_loops:CachesErrors", "permanent_error")
    assert result.figures["requests"] == 12 and result.figures["stops with the reason"]
    assert result.figures["identical failing calls"] == 11  # answered to the model, ran once
    assert result.verdict == "fail", result.summary


def test_a_resume_that_returned_is_its_outcome_though_it_left_a_thread_running(kit) -> None:
    from dataclasses import replace

    from exitkit.contract import Approve

    quick = replace(kit, timeout_s=10.0)
    setup = kit.setup("destructive", needs_approval=("delete_file",))
    kit.measure("attack_loops:LeavesAWorkerOnResume", setup)  # stops for approval
    run = quick.child("attack_loops:LeavesAWorkerOnResume", setup, decision=Approve())
    assert (run.returncode, run.outcome.status) == (0, "completed"), run.outcome
    assert run.wall_s < 8


def test_the_cli_exits_once_the_card_is_written_though_an_agent_left_a_thread_running(tmp_path) -> None:
    try:
        done = subprocess.run([sys.executable, "-m", "exitkit", "run", "attack_loops:LeavesAWorker", "--only",
                               "tool_error", "--out", "card"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=30, env=CHILD_ENV, check=False)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the CLI did not exit; card written: {(tmp_path / 'card').exists()}") from e
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wrote " in done.stdout and (tmp_path / "card" / "report.json").exists()


def test_an_agent_that_tells_its_caller_what_each_case_hopes_to_hear_still_fails_both_error_cases(
        judge: Judge) -> None:
    recover, denied = judge("attack_loops:Lies", "tool_error"), judge("attack_loops:Lies", "permanent_error")
    assert (recover.verdict, recover.figures["recovers"]) == ("fail", False)
    assert recover.figures["caller gets"].startswith("completed · errors.log mentions a timeout.")
    assert (denied.verdict, denied.figures["identical failing calls"]) == ("fail", 12)


def test_the_pytest_entry_fails_a_bad_spec_with_its_one_line_not_a_traceback(tmp_path) -> None:
    skip = "budget,permanent_error,approval,crash,cancellation,overhead"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--exitkit",
                           "nowhere:X", "--exitkit-skip", skip],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
                          env=CHILD_ENV)
    assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout[-3000:]
    assert done.stdout.count("cannot import 'nowhere' for adapter 'nowhere:X'") >= 2
    assert "Traceback" not in done.stdout and "raise AdapterError" not in done.stdout, done.stdout[-3000:]


def test_a_budget_checked_before_each_call_that_stops_short_of_the_next_turn_is_in_reach() -> None:
    from exitkit.cases import in_reach

    # Each request costs 0.001 more than the one before: after 0.001..0.004 (0.010 spent of 0.015),
    # the next would cost 0.005 and cross the budget, though the last one's 0.004 would not.
    assert in_reach([0.001, 0.002, 0.003, 0.004], 0.015)
    assert not in_reach([0.001, 0.002, 0.003], 0.015)  # 0.006 spent, the next 0.004: out of reach
    assert not in_reach([], 0.015)  # a run that sent nothing stopped nothing with its budget


def test_every_case_fails_a_run_that_never_returned_by_its_written_criteria() -> None:
    from exitkit.verdict import CRITERIA, NEVER_RETURNED

    assert all(text.endswith(NEVER_RETURNED) for text in CRITERIA.values())


def test_an_out_whose_report_md_is_a_folder_is_refused_before_any_case_runs(tmp_path, capsys) -> None:
    from exitkit.__main__ import main

    (tmp_path / "card" / "report.md").mkdir(parents=True)
    assert main([*PLAIN_NONE, "--out", str(tmp_path / "card")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("exitkit: --out ") and err.count("\n") == 1, err
    assert "report.md" in err and "· crash" not in err


def test_an_out_under_proc_is_refused_before_any_case_runs(capsys) -> None:
    from exitkit.__main__ import main

    assert main([*PLAIN_NONE, "--out", "/proc/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("exitkit: --out '/proc/x': ") and err.count("\n") == 1, err
    assert "· crash" not in err


def test_the_regenerate_line_shows_an_out_with_backticks_pipes_and_a_newline_in_one_code_span(
        tmp_path) -> None:
    import re

    from exitkit.__main__ import main

    out = tmp_path / "a`b|c\nd"
    assert main([*PLAIN_NONE, "--out", str(out)]) == 0
    [line] = [line for line in (out / "report.md").read_text().splitlines() if "Regenerate:" in line]
    span = re.search(r"Regenerate: (`+)(.*)\1\.$", line)
    assert span, line
    fence, command = span[1], span[2]
    assert "`" * len(fence) not in command  # the fence is longer than any run of backticks inside
    assert "a`b|c" in command and "\\n" in command and command.startswith(" python -m exitkit run ")


def test_symlinks_an_adapter_plants_in_its_runs_folder_are_never_written_through(tmp_path: Path,
                                                                                 monkeypatch) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the user's own file\n")
    monkeypatch.setenv("EXITKIT_TEST_VICTIM", str(victim))
    with Kit.serve(tmp_path / "kit") as kit:  # a kit started with the variable set: its runs get it
        setup = kit.setup("plan")
        assert kit.measure("attack_loops:Plants", setup).outcome.status == "planted"
        assert kit.child("attack_loops:Plants", setup).outcome.status == "planted"
    assert victim.read_text() == "the user's own file\n"


def test_a_helper_an_adapter_detached_from_its_process_group_ends_with_its_run(tmp_path: Path,
                                                                               monkeypatch) -> None:
    from test_exitkit_processes import _alive, _kill

    helpers = tmp_path / "helpers"
    monkeypatch.setenv("EXITKIT_TEST_HELPERS", str(helpers))
    try:
        with Kit.serve(tmp_path / "kit") as kit:
            run = kit.measure("attack_loops:DetachesAHelper", kit.setup("plan"))
            assert run.outcome.status == "completed"
            assert helpers.exists() and _alive(helpers, within_s=5) == []
    finally:
        _kill(helpers)


def test_a_run_refused_at_load_leaves_no_out_folder_behind(tmp_path, capsys) -> None:
    # `--out` is probed before the adapter loads; the folders the probe made go with it.
    from exitkit.__main__ import main

    assert main(["run", "nowhere:Adapter", "--out", str(tmp_path / "new" / "card")]) == 2
    assert "cannot import 'nowhere'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_leaves_its_standard_output_mid_line_still_returns_its_outcome(judge: Judge) -> None:
    plain, streams = judge("file_loop:FileLoop", "turn_cap"), judge("attack_loops:StreamsTokens", "turn_cap")
    assert streams.figures["caller gets"] == plain.figures["caller gets"] != "process ended without a result"
    assert (streams.verdict, streams.summary) == (plain.verdict, plain.summary)
