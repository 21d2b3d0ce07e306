"""A reply cut mid-body (the mock's `drop` fault) is a failed attempt: retried, then a clean stop."""

from __future__ import annotations

from harness import Limits


def test_the_harness_retries_a_cut_reply_then_stops_cleanly(drive, counting):
    wire = counting()
    s = drive("plan", transport=wire, mock_options="fault=drop@1x1")
    assert s.status == "completed" and s.turns == 3
    assert wire.attempt_headers == ["0", "0", "1", "0"]
    stuck = drive("plan", mock_options="fault=drop@1x99", limits=Limits(max_turns=5))
    assert (stuck.status, stuck.turns) == ("failed", 1)
    assert "gave up after 4 attempts" in stuck.error and "RemoteProtocolError" in stuck.error


def test_the_harness_retries_an_overloaded_529_as_it_retries_a_500(drive, counting):
    """529 (overloaded) is a 5xx the provider sends while busy, as Anthropic's OpenAI-compatible
    endpoint does: a failed attempt, not the run's end."""
    wire = counting()
    s = drive("plan", transport=wire, mock_options="fault=529@1x1")
    assert s.status == "completed" and s.turns == 3
    assert wire.attempt_headers == ["0", "0", "1", "0"]
