"""At the turn cap: whether the framework's own API hands the conversation so far back to the caller."""

from __future__ import annotations

from collections.abc import Callable

from exitkit.adapters.ours import RUN_ID
from exitkit.runner import Kit
from exitkit.verdict import CAP, Result
from harness.store import SQLiteStore

Judge = Callable[[str, str], Result]
PLAIN, OURS = "exitkit.adapters.plain:PlainLoop", "exitkit.adapters.ours:Ours"


def test_the_plain_loop_hands_back_every_message_it_holds_at_the_cap(kit: Kit) -> None:
    run = kit.measure(PLAIN, kit.setup("runaway", max_turns=CAP))
    # The loop holds the last request's messages, then the last reply and its tool's result.
    held = len(run.entries[-1].request["messages"]) + 2
    assert (run.outcome.status, run.outcome.transcript_messages) == ("max_turns", held)


def test_our_capped_run_hands_back_the_messages_its_saved_state_holds(kit: Kit) -> None:
    setup = kit.setup("runaway", max_turns=CAP)
    run = kit.measure(OURS, setup)
    saved = SQLiteStore.in_folder(setup.job().state_dir).load(RUN_ID)
    assert len(run.entries) == CAP
    assert run.outcome.transcript_messages == len(saved.messages)
    assert run.outcome.transcript_messages > len(run.entries[-1].request["messages"])


def test_the_turn_cap_cell_says_the_transcript_was_returned_with_its_count(judge: Judge) -> None:
    result = judge("exitkit.adapters.plain:PlainLoop", "turn_cap")
    count = result.figures["transcript messages"]
    assert isinstance(count, int) and count > CAP
    assert result.summary.endswith(f"· transcript returned ({count} messages)")


def test_a_loop_that_hands_back_nothing_at_the_cap_is_transcript_not_returned(judge: Judge) -> None:
    result = judge("stream_loop:StreamLoop", "turn_cap")
    assert result.figures["transcript messages"] is None
    assert result.summary.endswith("· transcript not returned")
