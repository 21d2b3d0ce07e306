"""The MCP experiments' prediction: exact for the run it re-words, and wrong for a wrong wording."""

from __future__ import annotations

import asyncio

import o200k
from experiments.beyond.mcp_channel import matches, predict, told
from experiments.chapter.tool_errors import recover
from harness.tools import GENERIC_ERROR


def test_a_run_re_worded_as_it_was_is_predicted_exactly_and_a_longer_message_costs_its_tokens(env):
    generic = asyncio.run(recover(env, "generic", "mcp-prediction"))
    assert matches(generic, predict(generic, GENERIC_ERROR, GENERIC_ERROR))
    longer = told("descriptive", "the tool's answer was lost")
    shifted = predict(generic, GENERIC_ERROR, longer)
    delta = o200k.count(longer) - o200k.count(GENERIC_ERROR)
    # Two turns: only the second prompt carries the tool message.
    assert shifted.input == generic.state.prompt_tokens + delta and delta > 0
    assert not matches(generic, shifted)
