"""The hard budget: an exact prompt count and a capped max_tokens keep spend within budget."""

import pytest

import o200k as tokens
from harness import Limits, MemoryTrace, Pricing, Usage


def test_hard_budget_never_exceeds_the_budget_over_a_sweep(drive):
    for budget in (0.0005, 0.0011, 0.002, 0.0033, 0.005, 0.0077, 0.01, 0.0123):
        s = drive("runaway", limits=Limits(max_turns=None, max_budget_usd=budget, hard_budget=True))
        assert s.status == "budget_exceeded"
        assert s.cost_usd <= budget, (budget, s.cost_usd)
    # the default (soft) check overshoots the same budget
    soft = drive("runaway", limits=Limits(max_turns=None, max_budget_usd=0.01))
    assert soft.cost_usd > 0.01


def test_hard_budget_caps_max_tokens_and_cuts_replies_cleanly(drive, counting):
    """A fine sweep lands some turns on a cut reply: still within budget, nothing run blindly."""
    cut = 0
    for i in range(6, 27):
        budget = i / 10_000
        trace, wire = MemoryTrace(), counting()
        s = drive("plan", trace=trace, transport=wire, min_reply_tokens=1,
                  limits=Limits(max_budget_usd=budget, hard_budget=True))
        assert s.cost_usd <= budget
        assert all("max_tokens" in b for b in wire.bodies)
        for body, usage in zip(wire.bodies, s.turn_usage, strict=True):
            assert usage.completion_tokens <= body["max_tokens"]
            # the prediction the cap rests on is exactly what the provider billed
            assert usage.prompt_tokens == tokens.prompt_tokens(body["messages"], body.get("tools"))
        if any(e["type"] == "turn" and e["finish"] == "length" for e in trace.events):
            cut += 1
            assert s.status == "budget_exceeded"
            assert all(r.ok for r in s.tool_runs)
    assert cut >= 1


def test_minimal_reply_that_does_not_fit_refuses_the_turn(drive, counting):
    wire = counting()
    s = drive("plan", transport=wire, limits=Limits(max_budget_usd=0.0001, hard_budget=True))
    assert (s.status, s.turns, s.cost_usd, len(wire.bodies)) == ("budget_exceeded", 0, 0.0, 0)


def test_pricing_is_configurable():
    from harness.usage import Usage

    assert Pricing().cost(Usage(prompt_tokens=204, completion_tokens=23)) == pytest.approx(0.000684)
    assert Pricing(input_per_million=1, output_per_million=0).cost(Usage(prompt_tokens=10**6)) == 1


def test_max_tokens_caps_every_reply_without_stopping_for_budget(drive, counting):
    """A plain reply-length cap is sent on every call; a reply it cuts is not a budget stop."""
    wire = counting()
    s = drive("plan", transport=wire, max_tokens=26)  # list_files (23 tokens) fits, read_file (29) not
    assert [b["max_tokens"] for b in wire.bodies] == [26, 26, 26]
    assert s.status == "completed" and s.turn_usage[1].completion_tokens == 26
    # turn 1's read_file call was cut mid-arguments: answered with an error, never run
    assert [r.tool for r in s.tool_runs] == ["list_files"]


def test_hard_budget_lowers_max_tokens_but_never_raises_it(drive, counting):
    wire = counting()
    drive("plan", transport=wire, max_tokens=50, limits=Limits(max_budget_usd=1.0, hard_budget=True))
    assert [b["max_tokens"] for b in wire.bodies] == [50, 50, 50]
    wire = counting()
    drive("plan", transport=wire, max_tokens=10_000, min_reply_tokens=1,
          limits=Limits(max_budget_usd=0.001, hard_budget=True))
    assert all(b["max_tokens"] < 10_000 for b in wire.bodies)


def _turn_cost(event: dict) -> float:
    usage = Usage(prompt_tokens=event["prompt_tokens"], completion_tokens=event["completion_tokens"])
    return Pricing().cost(usage)


@pytest.mark.parametrize("budget", [0.001, 0.002, 0.005])
@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
def test_a_sub_agent_spends_from_what_the_parent_has_left(drive, budget, hard):
    trace = MemoryTrace()
    s = drive("research", trace=trace, limits=Limits(max_budget_usd=budget, hard_budget=hard))
    turns = trace.of_type("turn")
    child = [e for e in turns if e["runId"] != s.run_id]
    assert s.cost_usd == pytest.approx(sum(_turn_cost(e) for e in turns), abs=1e-12)  # child included
    if hard:
        assert s.cost_usd <= budget  # not a cent past it, sub-agent included
    else:
        assert s.cost_usd - budget < max(_turn_cost(e) for e in turns)  # at most one turn over
    if s.tool_runs:
        # the child's own limit is what the parent had left when it started, not its $0.05 default
        spent_before = sum(_turn_cost(e) for e in turns if e["runId"] == s.run_id and e["turn"] == 1)
        assert s.tool_runs[0].details["child_cost_usd"] <= budget - spent_before + (
            0 if hard else max(_turn_cost(e) for e in child)
        )


@pytest.mark.parametrize("hard", [False, True], ids=["soft", "hard"])
def test_a_sub_agent_bills_its_calls_at_the_parents_prices(drive, hard):
    """The run's `Pricing` prices every model call it pays for, its sub-agent's included: a
    child billed at the default prices would under-bill a dearer provider and overshoot a hard budget."""
    dear = Pricing(input_per_million=20.0, output_per_million=120.0)
    budget = 0.05
    trace = MemoryTrace()
    s = drive("research", trace=trace, pricing=dear, limits=Limits(max_budget_usd=budget, hard_budget=hard))
    turns = trace.of_type("turn")
    child = [e for e in turns if e["runId"] != s.run_id]
    assert child, "the sub-agent made no model call"

    def priced(events: list[dict]) -> float:
        return sum(dear.cost(Usage(prompt_tokens=e["prompt_tokens"],
                                         completion_tokens=e["completion_tokens"])) for e in events)

    assert child[-1]["costUsd"] == pytest.approx(priced(child), abs=1e-9)
    assert s.cost_usd == pytest.approx(priced(turns), abs=1e-12)
    if hard:
        assert s.cost_usd <= budget
