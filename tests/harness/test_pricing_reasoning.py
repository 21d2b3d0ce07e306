"""Reasoning tokens reach the harness's usage, its trace and its price."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mock_support import serve_scripts

from harness import MemoryTrace, Pricing
from mockprovider.scripts.scenarios import Conversation, Reply, ToolCall

THINKS = 40


def thinker(c: Conversation) -> Reply:
    """Lists the files, then answers; reasons a fixed number of tokens before each reply."""
    if c.turn == 0:
        return Reply(tool_calls=(ToolCall(id="c1", name="list_files", arguments="{}"),), reasoning=THINKS)
    return Reply(content="errors.log mentions a timeout.", reasoning=THINKS)


@pytest.fixture(scope="module")
def thinker_url() -> Iterator[str]:
    with serve_scripts(thinker=thinker) as url:
        yield url


def test_reasoning_is_billed_as_output_and_priced_at_its_own_rate(drive, thinker_url):
    pricing = Pricing(reasoning_per_million=60.0)
    trace = MemoryTrace()
    s = drive("thinker", base_url=thinker_url, pricing=pricing, trace=trace)
    assert s.status == "completed"
    assert [u.reasoning_tokens for u in s.turn_usage] == [THINKS, THINKS]
    assert all(u.completion_tokens > THINKS for u in s.turn_usage)
    listed = sum(Pricing().cost(u) for u in s.turn_usage)
    assert s.cost_usd == pytest.approx(listed + 2 * THINKS * (60.0 - 12.0) / 1e6, rel=1e-12)
    assert [e["reasoning_tokens"] for e in trace.of_type("turn")] == [THINKS, THINKS]
