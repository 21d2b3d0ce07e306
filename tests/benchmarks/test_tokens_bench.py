"""Prompt-token counting of a 100-turn runaway conversation, with and without the cache."""

from __future__ import annotations

import o200k as tokens


def test_prompt_tokens_turn_100_cached(benchmark, runaway_100):
    messages = runaway_100
    expected = tokens.prompt_tokens(messages)
    assert benchmark(tokens.prompt_tokens, messages) == expected


def test_prompt_tokens_turn_100_uncached(benchmark, runaway_100):
    messages = runaway_100
    expected = tokens.prompt_tokens(messages)
    result = benchmark.pedantic(
        tokens.prompt_tokens, args=(messages,), setup=tokens.clear_cache, rounds=20
    )
    assert result == expected
