"""Beyond the chapter: prompt caching vs the turn cap, and the budget, at published cache rates.

The chapter prices every resent token at the list price, so a turn cap's bill is Θ(n²). Every
current provider caches the resent prefix. This reruns the turn-cap table (`runaway` at caps 8,
20, 50, 100) with the harness pricing what the mock reports cached:

- OpenAI's rule (automatic, from 1,024 tokens, in steps of 128) over Chat Completions, cached
  input at a quarter of the input price (the ratio OpenAI publishes for gpt-4.1: $0.50 vs $2.00);
- Anthropic's rule on the same transcripts, replayed through `/v1/messages` with a breakpoint on
  the system prompt and one on the newest message: reads at 0.1× the input price, 5-minute writes
  at 1.25×;

and the budget experiment's $0.010 with OpenAI's rate. Token prices stay the chapter's $2 / $12.
The arithmetic model's cached term (`Profile.cached_cost_micro`) predicts the cap-100 / cap-50
cost ratio from the first three turns before the runs are measured.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate
from typing import Any

import httpx
import numpy as np

from experiments.arithmetic.profile import IN_MICRO, Profile, dollars
from experiments.chapter.turn_cap import early_profile
from experiments.lab.charts import ACCENT, LIMIT, OURS, figure
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, Run, run_scenario, turn_costs
from harness import Pricing, Usage
from harness.chapter import chapter_tools, make_sandbox
from harness.tools import schema

NAME = "caching"
TITLE = "Beyond · Prompt caching vs the turn cap: `runaway` at caps 8, 20, 50, 100, cached"
CAPS = (8, 20, 50, 100)
BUDGETS_USD = (0.010, 0.050)
"""The budget experiment's first budget, and its last: the first runs out before any prompt
reaches the 1,024 tokens caching needs."""
LIST = Pricing()
OPENAI_MIN_TOKENS = 1024
"""OpenAI caches a prompt from 1,024 tokens on (docs/caching.md); stated here as the model states it."""
OPENAI_CACHED_FRACTION = Fraction(1, 4)
OPENAI = Pricing(cached_input_per_million=float(LIST.input_per_million * OPENAI_CACHED_FRACTION))
ANTHROPIC = Pricing(cached_input_per_million=LIST.input_per_million * 0.1,
                    cache_write_per_million=LIST.input_per_million * 1.25)


@dataclass(frozen=True, kw_only=True)
class Measured:
    by_cap: dict[int, Run]
    """The harness's runs at each cap, priced at OpenAI's cached rate."""
    anthropic: list[Usage]
    """Per turn of the cap-100 transcript, as `/v1/messages` billed it (in harness terms)."""
    budgets: dict[tuple[float, str], Run]
    """(budget, "list" or "cached") → the run stopped by that budget."""
    profile: Profile
    """Read off the first three turns of the cap-100 run alone."""

    def list_cost(self, cap: int) -> float:
        return sum(turn_costs(self.by_cap[cap].state))

    def openai_cost(self, cap: int) -> float:
        return self.by_cap[cap].state.cost_usd

    def anthropic_cost(self, cap: int) -> float:
        return sum(ANTHROPIC.cost(u) for u in self.anthropic[:cap])

    def anthropic_list_cost(self, cap: int) -> float:
        return sum(LIST.cost(u) for u in self.anthropic[:cap])

    def predicted_openai(self, cap: int) -> float:
        return dollars(self.profile.cached_cost_micro(cap, IN_MICRO * OPENAI_CACHED_FRACTION))


def _anthropic_body(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat transcript as a Messages request marking the system prompt and the newest block."""
    out: list[dict[str, Any]] = []
    for m in messages[1:]:
        if m["role"] == "user":
            out.append({"role": "user", "content": [{"type": "text", "text": m["content"]}]})
        elif m["role"] == "assistant":
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": json.loads(c["function"]["arguments"] or "{}")}
                       for c in m.get("tool_calls") or ()]
            out.append({"role": "assistant", "content": blocks})
        else:
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if out[-1]["role"] == "user" and out[-1]["content"][-1]["type"] == "tool_result":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    out[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "runaway", "max_tokens": 1024, "messages": out,
        "system": [{"type": "text", "text": messages[0]["content"], "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": t["function"]["name"], "description": t["function"]["description"],
                   "input_schema": t["function"]["parameters"]} for t in tools],
    }


async def _replay_on_messages(env: Env, run: Run) -> list[Usage]:
    """Each turn's request of `run` sent to `/v1/messages`; its usage in harness terms."""
    messages = run.state.messages
    ends = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    tools = [schema(t) for t in chapter_tools(make_sandbox(env.workdir / "caching-tools"))]
    usages = []
    async with httpx.AsyncClient(timeout=60) as client:
        for end in ends:
            reply = await client.post(f"{env.base_url}/messages", json=_anthropic_body(messages[:end], tools))
            reply.raise_for_status()
            u = reply.json()["usage"]
            read, write = u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
            prompt = u["input_tokens"] + read + write
            usages.append(Usage(prompt_tokens=prompt, completion_tokens=u["output_tokens"],
                                cached_tokens=read, cache_write_tokens=write))
    return usages


async def measure(env: Env, *, pricing: Pricing = OPENAI) -> Measured:
    """`pricing=LIST` prices what the provider cached at the full input price, as a harness that
    drops the cache fields does (for the tests)."""
    # The prediction's profile comes from a run of its own, of three turns, taken before the caps run.
    probe = await run_scenario(env, "runaway", run_id="caching-probe", max_turns=3, pricing=pricing)
    profile = early_profile(probe)
    budgets = [(b, kind) for b in BUDGETS_USD for kind in ("list", "cached")]
    runs = await asyncio.gather(
        *(run_scenario(env, "runaway", run_id=f"caching-cap{cap}", max_turns=cap, pricing=pricing)
          for cap in CAPS),
        *(run_scenario(env, "runaway", run_id=f"caching-budget-{b}-{kind}", max_turns=None, budget_usd=b,
                       pricing=pricing if kind == "cached" else LIST) for b, kind in budgets),
    )
    by_cap = dict(zip(CAPS, runs, strict=False))
    longest = by_cap[max(CAPS)]
    return Measured(
        by_cap=by_cap,
        anthropic=await _replay_on_messages(env, longest),
        budgets=dict(zip(budgets, runs[len(CAPS):], strict=True)),
        profile=profile,
    )


def _ratio(cost: Any) -> float:
    return cost(100) / cost(50)


def table(m: Measured) -> Table:
    rows = [
        {
            "cap": cap,
            "turns": r.state.turns,
            "input_tokens": r.state.prompt_tokens,
            "openai_cached_tokens": r.state.usage.cached_tokens,
            "anthropic_read_tokens": sum(u.cached_tokens for u in m.anthropic[:cap]),
            "anthropic_write_tokens": sum(u.cache_write_tokens for u in m.anthropic[:cap]),
            "cost_list_usd": round(m.list_cost(cap), 6),
            "cost_openai_cached_usd": round(m.openai_cost(cap), 6),
            "predicted_openai_cached_usd": round(m.predicted_openai(cap), 6),
            "cost_anthropic_list_usd": round(m.anthropic_list_cost(cap), 6),
            "cost_anthropic_cached_usd": round(m.anthropic_cost(cap), 6),
        }
        for cap, r in m.by_cap.items()
    ]
    budget = [
        {"cap": f"budget {usd(b)}, no cap, {'list price' if kind == 'list' else 'cached'}",
         "turns": r.state.turns, "input_tokens": r.state.prompt_tokens,
         "openai_cached_tokens": r.state.usage.cached_tokens,
         "cost_list_usd" if kind == "list" else "cost_openai_cached_usd": round(r.state.cost_usd, 6)}
        for (b, kind), r in m.budgets.items()
    ]
    return Table(rows=rows + budget)


def _model_budget_turns(m: Measured, budget: float) -> int:
    """Turns a soft budget allows at OpenAI's cached rate, by the model: the first n whose
    spend reaches the budget."""
    return next(n for n in range(1, 10_000) if m.predicted_openai(n) >= budget)


def _never_cached(run: Run) -> bool:
    """Whether no prompt of `run` reached the `OPENAI_MIN_TOKENS` caching needs."""
    return all(u.prompt_tokens < OPENAI_MIN_TOKENS for u in run.state.turn_usage)


def _overshoot_within_a_turn(run: Run, budget: float, pricing: Pricing) -> bool:
    """Whether the soft budget stopped `run` within one turn of spending it: every turn but the
    last was bought while money was left."""
    spent = sum(map(pricing.cost, run.state.turn_usage[:-1]))
    return spent < budget <= run.state.cost_usd + 1e-12


def checks(m: Measured) -> dict[str, bool]:
    cached_micro = IN_MICRO * OPENAI_CACHED_FRACTION
    predicted = float(m.profile.cached_cost_micro(100, cached_micro)
                      / m.profile.cached_cost_micro(50, cached_micro))
    reads, writes = [u.cached_tokens for u in m.anthropic], [u.cache_write_tokens for u in m.anthropic]
    return {
        "the OpenAI-cached cost at every cap = the model's cached-term prediction": all(
            abs(m.openai_cost(k) - m.predicted_openai(k)) < 1e-9 for k in CAPS),
        "the predicted cap-100/cap-50 cost ratio = the measured one": abs(_ratio(m.openai_cost) - predicted)
        < 1e-9,
        "caching lowers the cap-100 bill at both providers' rates": m.openai_cost(100) < m.list_cost(100)
        and m.anthropic_cost(100) < m.anthropic_list_cost(100),
        "with caching, doubling the cap costs less than at list prices": _ratio(m.openai_cost)
        < _ratio(m.list_cost) and _ratio(m.anthropic_cost) < _ratio(m.anthropic_list_cost),
        "Anthropic: each turn reads exactly what the turn before read and wrote": all(
            reads[k] in (0, reads[k - 1] + writes[k - 1]) for k in range(1, len(reads))) and reads[-1] > 0,
        f"the {usd(BUDGETS_USD[0])} budget runs out before any prompt reaches {OPENAI_MIN_TOKENS:,} "
        "tokens": all(_never_cached(m.budgets[BUDGETS_USD[0], kind]) for kind in ("list", "cached")),
        "every budget is overshot by at most one turn, cached or not": all(
            _overshoot_within_a_turn(m.budgets[b, kind], b, OPENAI if kind == "cached" else LIST)
            for b in BUDGETS_USD for kind in ("list", "cached")),
        "each cached budget stops where the model says, never earlier than at list price": all(
            m.budgets[b, "cached"].state.turns == _model_budget_turns(m, b)
            >= m.budgets[b, "list"].state.turns for b in BUDGETS_USD),
    }


def prose(m: Measured) -> Prose:
    listed, openai, anthropic = _ratio(m.list_cost), _ratio(m.openai_cost), _ratio(m.anthropic_cost)
    small, large = BUDGETS_USD
    return Prose(
        finding=(
            f"With caching, doubling the cap from 50 to 100 multiplies cost by {openai:.2f} at OpenAI's "
            f"cached rate and {anthropic:.2f} at Anthropic's, not {listed:.2f}: the resent prefix is "
            "still Θ(n²) tokens, but most of it is billed at a fraction of the price."
        ),
        ours=f"×{openai:.2f} (OpenAI 0.25×), ×{anthropic:.2f} (Anthropic 0.1× read, 1.25× write), "
        f"×{listed:.2f} at list price; cap 100 {usd(m.openai_cost(100))} / {usd(m.anthropic_cost(100))} "
        f"vs {usd(m.list_cost(100))}",
        chapter="— (the chapter prices every token at the list price)",
        notes=[
            "The harness prices each turn from the usage the mock reports (`cached_tokens`, a part of "
            f"`prompt_tokens`), at ${OPENAI.cached_input_per_million:g}/M cached input beside "
            f"${LIST.input_per_million:g}/M input. The Anthropic column replays each turn's request of "
            "the cap-100 run through `/v1/messages` with a breakpoint on the system prompt and one on "
            f"the newest block; reads cost ${ANTHROPIC.cached_input_per_million:g}/M and 5-minute "
            f"writes ${ANTHROPIC.cache_write_per_million:g}/M. docs/caching.md states both rules.",
            f"Predicted before measuring: the profile of a three-turn run taken first (a = "
            f"{m.profile.first_prompt}, g = {m.profile.growth}) with the cached term (turn k reads turn "
            "k−1's prompt, floored to 128, once it is 1,024 tokens) gives every cap's cost (column "
            "`predicted_openai_cached_usd`) and the 100/50 ratio.",
            f"Budgets: {usd(small)} buys {m.budgets[small, 'list'].state.turns} turns at list price and "
            f"{m.budgets[small, 'cached'].state.turns} with caching (no prompt reaches 1,024 tokens "
            f"before the money is spent); {usd(large)} buys {m.budgets[large, 'list'].state.turns} "
            f"and {m.budgets[large, 'cached'].state.turns}. The overshoot is still at most one turn.",
            "The Messages transcript is a few tokens a turn shorter than the chat one (a `tool_result` "
            "block carries no tool name), so the Anthropic columns are compared with their own "
            "list-price bill (`cost_anthropic_list_usd`).",
        ],
    )


def chart(m: Measured):
    fig, ax = figure("`runaway`: cost vs turn cap, list price and cached", "turn cap", "cost (USD)")
    per_turn = {
        "list price": turn_costs(m.by_cap[100].state),
        "OpenAI cached (0.25×)": [OPENAI.cost(u) for u in m.by_cap[100].state.turn_usage],
        "Anthropic cached (0.1× read, 1.25× write)": [ANTHROPIC.cost(u) for u in m.anthropic],
    }
    n = np.arange(1, len(m.anthropic) + 1)
    for (label, costs), color in zip(per_turn.items(), (LIMIT, OURS, ACCENT), strict=True):
        ax.plot(n, list(accumulate(costs)), color=color, label=label)
    ax.legend(loc="upper left")
    return fig
