"""Agents at the boundaries of each criterion: the kit must neither be fooled nor blame the agent
for its own trouble. Each agent here is the file loop (or a new one) broken in one way."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from exitkit.verdict import REASON, Result

Judge = Callable[[str, str], Result]


def test_a_streamed_loop_without_usage_gets_its_cap_verdict_and_an_unknown_cost(judge: Judge) -> None:
    result = judge("stream_loop:StreamLoop", "turn_cap")
    assert (result.verdict, result.figures["requests"]) == ("pass", 8)
    assert result.figures["cost usd"] is None


@pytest.mark.slow
def test_a_streamed_loop_without_a_budget_gets_none_exists_with_the_spend_unknown(judge: Judge) -> None:
    result = judge("stream_loop:StreamLoop", "budget")
    assert (result.verdict, result.figures["requests"]) == ("none exists", 60)
    assert result.figures["spent usd"] is None
    assert "spend unknown" in result.summary


def test_a_loop_that_talks_another_api_is_an_error_not_a_stop_with_no_requests(judge: Judge) -> None:
    result = judge("broken_loops:ResponsesLoop", "turn_cap")
    assert result.verdict == "error"
    assert "/v1/responses" in result.summary


def test_a_loop_that_runs_on_after_stop_fails_cancellation(judge: Judge) -> None:
    result = judge("broken_loops:RunsOnAfterStop", "cancellation")
    assert result.verdict == "fail", result.figures
    assert result.figures["requests after Stop"] == 1
    assert result.summary.startswith("ran on after Stop")


def test_a_loop_that_stops_at_once_on_stop_sends_nothing_after_it(judge: Judge) -> None:
    result = judge("file_loop:FileLoop", "cancellation")
    assert result.verdict == "pass", result.figures
    assert result.figures["requests after Stop"] == 0


def test_saying_permission_denied_without_running_the_call_fails(judge: Judge) -> None:
    result = judge("broken_loops:GivesUpUnseen", "permanent_error")
    assert result.verdict == "fail"
    assert result.figures["identical failing calls"] == 0
    assert result.summary == "the call never ran · 0 requests"


def test_an_adapter_the_new_process_cannot_import_is_an_error_that_says_so(judge: Judge) -> None:
    result = judge("parent_only:ParentOnly", "approval")
    assert result.verdict == "error"
    assert "could not load the adapter in a new process" in result.summary
    assert "missing in the new process" in result.summary


def test_a_resume_gets_the_environment_the_kit_started_with_not_what_a_run_left_in_it(judge: Judge) -> None:
    import os

    try:
        result = judge("broken_loops:KeepsStateInTheEnvironment", "approval")
    finally:
        os.environ.pop("EXITKIT_TEST_STATE", None)
    assert result.verdict == "fail"
    assert result.figures["runs once when approved in a new process"] is False
    assert "KeyError" in result.figures["resumed"]


def test_what_a_run_leaves_running_is_cancelled_and_counts_in_no_later_case() -> None:
    from exitkit.card import check

    _, (denied, cap) = check(["broken_loops:LeavesItRunning"], cases=["permanent_error", "turn_cap"],
                             log=lambda line: None)
    assert denied.verdict == "pass"
    assert cap.figures["requests"] == 8, cap.figures
    assert cap.verdict == "pass"


def test_a_budget_is_pass_on_time_warn_one_request_late_and_fail_two_late(judge: Judge) -> None:
    verdicts = {late: judge(f"budget_loops:{cls}", "budget")
                for late, cls in enumerate(("BudgetLoop", "OneTurnLate", "TwoTurnsLate"))}
    assert {late: r.verdict for late, r in verdicts.items()} == {0: "pass", 1: "warn", 2: "fail"}
    assert [r.figures["requests after the budget was reached"] for r in verdicts.values()] == [0, 1, 2]
    on_time = verdicts[0].figures
    assert 0 < on_time["overshoot usd"] < on_time["spent usd"] / 2


def test_a_cap_off_by_one_either_way_is_caught(judge: Judge) -> None:
    over, short = judge("broken_loops:CapOffByOne", "turn_cap"), judge("broken_loops:CapOneShort", "turn_cap")
    assert (over.verdict, over.figures["requests"]) == ("fail", 9)
    assert over.summary.startswith("over the cap by 1 · 9 requests · transcript")
    assert (short.verdict, short.figures["requests"]) == ("warn", 7)


@pytest.mark.slow
def test_a_rejection_whose_reason_reaches_the_model_only_in_part_fails_approval(judge: Judge) -> None:
    result = judge("broken_loops:PartReason", "approval")
    assert result.verdict == "fail"
    assert result.summary == "rejection reason not sent"
    assert result.figures["text sent back on rejection"] == "Rejected by the user: I declined: "


@pytest.mark.slow
def test_a_loop_saving_only_after_the_tool_returns_runs_the_effect_again_after_a_crash(judge: Judge) -> None:
    result = judge("broken_loops:ForgetsTheCrash", "crash")
    assert result.figures["crashed process exit"] == -9
    assert (result.verdict, result.figures["delete_file runs"]) == ("fail", 2)


@pytest.mark.slow
def test_a_run_that_ends_after_the_tool_would_have_finished_fails_cancellation(judge: Judge) -> None:
    result = judge("broken_loops:SlowToStop", "cancellation")
    assert result.figures["tool saw it"] and result.figures["Stop to end ms"] > 1800
    assert result.verdict == "fail"
    assert result.summary.startswith("stops too late · ")


@pytest.mark.slow
def test_a_resume_neither_finishing_nor_surfacing_the_call_after_a_crash_is_a_warning(judge: Judge) -> None:
    result = judge("broken_loops:GivesUpAfterACrash", "crash")
    assert result.figures["delete_file runs"] == 1
    assert (result.verdict, result.summary) == ("warn", "ran once · lost: raised RuntimeError")
    assert judge("file_loop:FileLoop", "crash").verdict == "pass"


def test_the_text_sent_back_is_found_under_the_call_id_the_agent_used(judge: Judge) -> None:
    result = judge("file_loop:OwnIds", "tool_error")
    assert result.verdict == "pass"
    sent = "Error: no such file: timeout.log. Call list_files to see what exists."
    assert result.figures["text sent back"] == sent


@pytest.mark.slow
def test_a_rejection_sent_under_the_agents_own_call_id_reaches_the_model(judge: Judge) -> None:
    result = judge("file_loop:OwnIds", "approval")
    assert result.verdict == "pass", result.summary
    assert result.figures["text sent back on rejection"].endswith(REASON)


def test_a_resume_runs_in_a_new_interpreter_with_the_environment_the_kit_started_with(kit) -> None:
    import os

    from exitkit.contract import Approve

    setup = kit.setup("destructive")
    os.environ["EXITKIT_TEST_LATE"] = "set after the kit started"
    try:
        run = kit.child("broken_loops:SaysWhereItRuns", setup, decision=Approve())
    finally:
        del os.environ["EXITKIT_TEST_LATE"]
    pid, argv0, late = run.outcome.answer.split(" ")
    assert int(pid) != os.getpid() and run.returncode == 0
    assert argv0.endswith(os.path.join("exitkit", "child.py"))
    assert late == "None"


def test_a_resume_after_stop_that_sends_nothing_is_a_warning_not_an_invalid_request(judge: Judge) -> None:
    result = judge("broken_loops:StopIsTheEnd", "cancellation")
    assert result.figures["next request"] == "none: the resume sent nothing"
    assert result.verdict == "warn", result.summary
    assert result.summary.endswith("· the resume sent no request")


def test_a_resume_that_reads_the_terminal_gets_end_of_file_not_the_kits_stdin(kit) -> None:
    import os
    from dataclasses import replace

    from exitkit.contract import Approve

    quick = replace(kit, timeout_s=5.0)
    read, write = os.pipe()  # a terminal nobody types into
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        run = quick.child("broken_loops:AsksOnTheTerminal", kit.setup("destructive"), decision=Approve())
    finally:
        os.dup2(saved, 0)
        for fd in (read, write, saved):
            os.close(fd)
    assert (run.outcome.status, run.outcome.answer) == ("asked", "''"), run.outcome
