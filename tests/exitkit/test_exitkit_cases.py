"""Each case judged at the provider and the ledger: the plain loop, ours, and loops broken on purpose."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from exitkit.verdict import REASON, Result

Judge = Callable[[str, str], Result]
PLAIN, OURS = "exitkit.adapters.plain:PlainLoop", "exitkit.adapters.ours:Ours"


def test_the_plain_loop_holds_its_cap_of_8_and_runs_the_last_call(judge: Judge) -> None:
    result = judge(PLAIN, "turn_cap")
    assert result.verdict == "pass"
    assert result.figures["requests"] == 8
    assert result.figures["tool runs"] == 8
    assert result.figures["last call"] == "ran"


def test_our_capped_run_keeps_its_last_call_pending_and_a_new_process_runs_it(judge: Judge) -> None:
    result = judge(OURS, "turn_cap")
    assert (result.verdict, result.figures["requests"], result.figures["tool runs"]) == ("pass", 8, 7)
    assert result.figures["last call"] == "pending"
    n = result.figures["transcript messages"]
    assert result.summary == f"cap held · 8 requests · last call pending · transcript returned ({n} messages)"


def test_a_loop_that_ignores_its_cap_fails_and_the_kits_guard_ends_it(judge: Judge) -> None:
    result = judge("broken_loops:IgnoresCap", "turn_cap")
    assert result.verdict == "fail"
    assert result.figures["requests"] > 8
    assert "kit guard" in result.summary


@pytest.mark.slow
def test_a_budget_that_does_not_exist_is_reported_with_what_stopped_the_run(judge: Judge) -> None:
    result = judge(PLAIN, "budget")
    assert result.verdict == "none exists"
    assert result.figures["requests"] == 60
    assert result.figures["stopped by"] == "its turn cap of 60"
    assert result.figures["spent usd"] > 20 * result.figures["budget usd"]


def test_our_budget_stops_before_any_request_past_it(judge: Judge) -> None:
    result = judge(OURS, "budget")
    assert result.verdict == "pass"
    assert result.figures["requests after the budget was reached"] == 0
    assert 0 < result.figures["overshoot usd"] < result.figures["spent usd"] / 2


def test_the_error_sentence_sent_back_is_read_from_the_next_request(judge: Judge) -> None:
    result = judge(PLAIN, "tool_error")
    assert result.verdict == "pass"
    sent = "Error: no such file: timeout.log. Call list_files to see what exists."
    assert result.figures["text sent back"] == sent
    assert result.figures["identical retries"] == 0


def test_swallowing_tool_errors_fails_both_error_cases(judge: Judge) -> None:
    recover = judge("broken_loops:SwallowsErrors", "tool_error")
    assert (recover.verdict, recover.figures["text sent back"]) == ("fail", "")
    assert not recover.figures["recovers"]
    denied = judge("broken_loops:SwallowsErrors", "permanent_error")
    assert denied.verdict == "fail"
    assert denied.figures["identical failing calls"] == 12


def test_a_permission_error_stops_the_plain_loop_at_once_with_the_reason(judge: Judge) -> None:
    result = judge(PLAIN, "permanent_error")
    assert result.verdict == "pass"
    assert result.figures["identical failing calls"] == 1
    assert "permission denied: private.key" in result.figures["caller gets"]


@pytest.mark.slow
def test_approval_across_processes_runs_the_deletion_once_and_never_again(judge: Judge) -> None:
    result = judge("file_loop:FileLoop", "approval")
    assert result.verdict == "pass", result.figures
    assert result.figures["deletions after approval"] == 1
    assert result.figures["deletions after the second resume"] == 1
    assert REASON in result.figures["text sent back on rejection"]
    assert result.figures["answer after rejection"] == "I did not delete anything: you declined the deletion."


def test_a_loop_that_reruns_the_effect_on_a_second_resume_fails_approval(judge: Judge) -> None:
    result = judge("broken_loops:ReRunsEffect", "approval")
    assert result.verdict == "fail"
    assert result.summary == "ran again on a second resume"
    assert result.figures["deletions after the second resume"] == 2


def test_our_crash_after_the_deletion_is_surfaced_as_in_doubt_not_run_twice(judge: Judge) -> None:
    result = judge(OURS, "crash")
    assert result.figures["crashed process exit"] == -9
    assert (result.verdict, result.figures["delete_file runs"]) == ("pass", 1)
    assert result.figures["surfaced as in doubt"]


def test_approval_and_crash_without_resume_say_none_exists_and_run_nothing(judge: Judge) -> None:
    for case in ("approval", "crash"):
        result = judge(PLAIN, case)
        assert result.verdict == "none exists"
        assert result.figures == {"limit": "none exists"}


def test_stop_cancels_our_tool_and_the_resumed_history_is_valid(judge: Judge) -> None:
    result = judge(OURS, "cancellation")
    assert result.verdict == "pass", result.figures
    assert result.figures["tool saw it"] and not result.figures["tool finished anyway"]
    assert result.figures["next request status"] == 200
    assert result.figures["dangling tool calls"] == []


@pytest.mark.slow
@pytest.mark.parametrize(("broken", "fails"), [
    ("IgnoresCap", {"turn_cap"}),
    ("ReRunsEffect", {"approval"}),
    ("SwallowsErrors", {"tool_error", "permanent_error"}),
])
def test_a_broken_loop_fails_exactly_the_cases_it_breaks(judge: Judge, broken: str, fails: set[str]) -> None:
    cases = ("turn_cap", "tool_error", "permanent_error", "approval", "crash", "cancellation")
    sound = {c for c in cases if judge("file_loop:FileLoop", c).verdict == "fail"}
    assert sound == set()
    assert {c for c in cases if judge(f"broken_loops:{broken}", c).verdict == "fail"} == fails


def test_stop_is_pressed_into_the_slow_tool_for_an_agent_slow_to_send_its_first_request(judge: Judge) -> None:
    result = judge("broken_loops:SlowToStart", "cancellation")
    assert result.verdict == "pass", result.summary
    assert result.figures["tool saw it"] and result.summary.startswith("stops in ")


def test_an_error_sent_back_as_user_text_is_found_in_the_next_request(judge: Judge) -> None:
    result = judge("broken_loops:ErrorAsUserText", "tool_error")
    sent = "Observation: Error: no such file: timeout.log. Call list_files to see what exists."
    assert (result.figures["text sent back"], result.figures["sent as"]) == (sent, "user")
    assert result.verdict == "pass", result.summary


def test_an_agent_that_never_deletes_is_told_so_not_that_it_deleted(judge: Judge) -> None:
    result = judge("broken_loops:NeverDeletes", "approval")
    assert result.verdict == "fail"
    assert result.summary == ("no request before approval; never ran when approved; rejection reason not "
                              "sent; no answer after rejection"), result.summary


def test_one_request_over_the_cap_with_every_call_up_to_it_run_says_so(judge: Judge) -> None:
    result = judge("broken_loops:OneOverLastPending", "turn_cap")
    assert (result.verdict, result.figures["requests"], result.figures["tool runs"]) == ("fail", 9, 8)
    assert result.figures["last call"] == "ran"
    assert result.summary.startswith("over the cap by 1 · 9 requests"), result.summary


def test_a_run_the_kit_timed_out_after_stop_never_returned_not_stopped_too_late(kit) -> None:
    from dataclasses import replace

    from exitkit.card import run_case
    from exitkit.loader import declared, load

    spec = "broken_loops:HangsAfterStop"
    result = run_case(replace(kit, timeout_s=6.0), declared(spec, load(spec)), "cancellation")
    assert result.verdict == "fail"
    assert result.summary.startswith("never returned after Stop · kit timeout"), result.summary


def test_the_overhead_headline_names_the_requests_the_run_made_not_its_cap(judge: Judge) -> None:
    result = judge("file_loop:FileLoop", "overhead")
    assert "(plan, 3 requests)" in result.summary, result.summary
