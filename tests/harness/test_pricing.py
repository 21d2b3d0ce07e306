"""Pricing of cached, cache-write and reasoning tokens: cost, budgets and the trace use them."""

from __future__ import annotations

import pytest

from harness import Limits, MemoryTrace, Pricing, Usage
from harness.usage import reply_cap

CACHED = Usage(prompt_tokens=2000, completion_tokens=300, cached_tokens=1536, cache_write_tokens=200,
               reasoning_tokens=100)


def test_unset_prices_bill_every_token_at_the_list_price_to_the_last_bit():
    plain = Usage(prompt_tokens=CACHED.prompt_tokens, completion_tokens=CACHED.completion_tokens)
    assert Pricing().cost(CACHED) == Pricing().cost(plain) == 2000 * 2e-6 + 300 * 12e-6


def test_each_part_is_billed_at_its_own_price():
    pricing = Pricing(input_per_million=3, output_per_million=15, cached_input_per_million=0.3,
                      cache_write_per_million=3.75, reasoning_per_million=15)
    expected = (264 * 3 + 1536 * 0.3 + 200 * 3.75 + 200 * 15 + 100 * 15) / 1e6
    assert pricing.cost(CACHED) == pytest.approx(expected, rel=1e-12)
    assert pricing.cost(CACHED) < Pricing(input_per_million=3, output_per_million=15).cost(CACHED)


def test_usage_adds_its_parts():
    total = CACHED + CACHED
    assert (total.cached_tokens, total.cache_write_tokens, total.reasoning_tokens) == (3072, 400, 200)


@pytest.mark.parametrize(
    "name", ["cached_input_per_million", "cache_write_per_million", "reasoning_per_million"]
)
def test_a_negative_or_nan_price_is_refused(name):
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match=name):
            Pricing(**{name: bad})


def test_hard_budget_prices_the_prompt_at_its_dearest_possible_rate():
    """Whether the provider writes the prompt to its cache is known only after the call."""
    limits = Limits(max_budget_usd=0.01, hard_budget=True)
    plain = reply_cap(limits, Pricing(), cost_usd=0.0, prompt_tokens=1000)
    dear = reply_cap(limits, Pricing(cache_write_per_million=4.0), cost_usd=0.0, prompt_tokens=1000)
    assert plain == int((0.01 - 1000 * 2e-6 - 1e-12) // 12e-6)
    assert dear == int((0.01 - 1000 * 4e-6 - 1e-12) // 12e-6) < plain


def test_a_long_run_bills_what_the_provider_cached_at_the_cached_price(drive):
    """`runaway` passes 1,024 prompt tokens after a few turns; the mock then reports caching."""
    pricing = Pricing(cached_input_per_million=0.5)
    trace = MemoryTrace()
    s = drive("runaway", limits=Limits(max_turns=30), pricing=pricing, trace=trace)
    cached = [u.cached_tokens for u in s.turn_usage]
    assert cached[0] == 0 and cached[-1] > 0 and s.usage.cached_tokens == sum(cached)
    assert s.cost_usd == pytest.approx(sum(pricing.cost(u) for u in s.turn_usage), rel=1e-12)
    assert s.cost_usd < sum(Pricing().cost(u) for u in s.turn_usage)
    lines = trace.of_type("turn")
    assert [e.get("cached_tokens", 0) for e in lines] == cached
    assert "cached_tokens" not in lines[0]  # the chapter's line shape while nothing is cached


def test_harness_show_lists_cached_tokens_per_turn(mock_url, tmp_path, capsys):
    from harness.cli import main

    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    main([*argv, "run", "--scenario", "runaway", "--max-turns", "16", "--run-id", "long"])
    main([*argv, "run", "--scenario", "runaway", "--max-turns", "3", "--run-id", "short"])
    capsys.readouterr()
    main([*argv, "show", "long"])
    cached = next(line for line in capsys.readouterr().out.splitlines() if "per-turn cached tokens" in line)
    counts = [int(n) for n in cached.split(":")[1].split(",")]
    assert len(counts) == 16 and counts[0] == 0 and counts[-1] > 0 and counts[-1] % 128 == 0
    main([*argv, "show", "short"])
    assert "cached" not in capsys.readouterr().out  # nothing cached: the chapter's lines only


def test_cost_is_never_negative_when_cache_parts_overlap_the_prompt():
    """A provider may report cache reads and writes that together exceed the prompt; each
    part is billed at most once, within the prompt it is a part of."""
    free_cache = Pricing(input_per_million=3, cached_input_per_million=0, cache_write_per_million=0)
    overlapping = Usage(prompt_tokens=100, cached_tokens=100, cache_write_tokens=100)
    assert free_cache.cost(overlapping) == 0.0
    dear_writes = Pricing(input_per_million=3, cached_input_per_million=0.3, cache_write_per_million=3.75)
    assert dear_writes.cost(Usage(prompt_tokens=100, cached_tokens=60, cache_write_tokens=100)) == (
        pytest.approx((60 * 0.3 + 40 * 3.75) / 1e6, rel=1e-12))
    free_thought = Pricing(reasoning_per_million=0)
    assert free_thought.cost(Usage(completion_tokens=10, reasoning_tokens=20)) == 0.0


def test_list_and_show_json_print_money_without_float_noise(mock_url, tmp_path, capsys):
    import json

    from harness.cli import main
    from harness.trace import money

    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    for turns in (1, 2, 3):
        main([*argv, "run", "--scenario", "runaway", "--max-turns", str(turns), "--run-id", f"r{turns}"])
    capsys.readouterr()
    main([*argv, "list", "--json"])
    listed = [json.loads(line)["cost_usd"] for line in capsys.readouterr().out.splitlines()]
    main([*argv, "show", "r3", "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert shown["cost_usd"] == money(shown["run"]["cost_usd"]) > 0
    assert listed and all(c == money(c) and len(repr(c)) <= 12 for c in [*listed, shown["cost_usd"]])
