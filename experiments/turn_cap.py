"""2. Turn cap vs cost: `runaway` never answers, so the cap is the only exit, and it is Θ(n²)."""

from __future__ import annotations

import asyncio
from itertools import accumulate

import numpy as np

from experiments.common import CHAPTER, LIMIT, OURS, Env, Outcome, figure, run_scenario, usd
from harness import Limits, Pricing

NAME = "turn_cap"
TITLE = "2 · Turn cap vs cost: `runaway` at caps 8, 20, 50, 100"
CAPS = (8, 20, 50, 100)
CHAPTER_INPUT = {8: "3,431", 20: "", 50: "88,649", 100: "337,299"}
CHAPTER_COST = {20: "> $0.038"}


async def measure(env: Env) -> Outcome:
    runs = await asyncio.gather(
        *(
            run_scenario(env, "runaway", run_id=f"runaway-cap{cap}", limits=Limits(max_turns=cap))
            for cap in CAPS
        )
    )
    by_cap = dict(zip(CAPS, runs, strict=True))
    rows = [
        {
            "cap": cap,
            "turns": r.state.turns,
            "tool_runs": r.tool_runs,
            "input_tokens": r.state.prompt_tokens,
            "output_tokens": r.state.completion_tokens,
            "cost_usd": round(r.state.cost_usd, 6),
            "status": r.state.status,
            "chapter_input_tokens": CHAPTER_INPUT[cap],
            "chapter_cost": CHAPTER_COST.get(cap, ""),
        }
        for cap, r in by_cap.items()
    ]
    # The curve over every cap: the cap-100 run's per-turn bill, summed turn by turn.
    # A cap of n stops the same deterministic run after n turns, so its prefix sum is the bill.
    usage = by_cap[max(CAPS)].state.turn_usage
    pricing = Pricing()
    curve_in = list(accumulate(u.prompt_tokens for u in usage))
    curve_cost = list(accumulate(pricing.cost(u) for u in usage))
    n = np.arange(1, len(usage) + 1)
    a, b, c = np.polyfit(n, curve_in, 2)
    fit_err = float(np.max(np.abs(np.polyval([a, b, c], n) - curve_in)))
    i50, i100 = by_cap[50].state.prompt_tokens, by_cap[100].state.prompt_tokens
    c50, c100 = by_cap[50].state.cost_usd, by_cap[100].state.cost_usd
    in_ratio, cost_ratio = i100 / i50, c100 / c50

    def chart():
        fig, ax = figure("`runaway`: input tokens and cost vs turn cap", "turn cap", "input tokens")
        ax.plot(n, curve_in, color=OURS, label="input tokens (ours)")
        ax.plot(
            n,
            np.polyval([a, b, c], n),
            color=LIMIT,
            linestyle="--",
            linewidth=1,
            label=f"fit {a:.1f}n² + {b:.0f}n + {c:.0f}",
        )
        ax.scatter([8, 50, 100], [3431, 88649, 337299], color=CHAPTER, zorder=3, label="chapter")
        ax.scatter(CAPS, [by_cap[k].state.prompt_tokens for k in CAPS], color=OURS, zorder=3)
        right = ax.twinx()
        right.plot(n, curve_cost, color=OURS, alpha=0.35, linestyle=":", label="cost (ours, right)")
        right.set_ylabel("cost (USD)")
        right.grid(False)
        lines = ax.get_legend_handles_labels()
        more = right.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left")
        return fig

    curve = [
        {"cap": int(k), "input_tokens": i, "cost_usd": round(cst, 6)}
        for k, i, cst in zip(n, curve_in, curve_cost, strict=True)
    ]
    return Outcome(
        rows=rows
        + [{"cap": f"curve:{row['cap']}", **{k: v for k, v in row.items() if k != "cap"}} for row in curve],
        table=rows,
        finding=(
            f"Doubling the cap from 50 to 100 multiplies input tokens by {in_ratio:.2f} and cost by "
            f"{cost_ratio:.2f} (chapter 3.8 and 3.7): turn n resends every earlier turn, so the "
            f"bill is Θ(n²), not linear in the cap."
        ),
        ours=f"input {by_cap[8].state.prompt_tokens:,} @8, {i50:,} @50, {i100:,} @100; "
        f"×{in_ratio:.2f} input, ×{cost_ratio:.2f} cost; 20 turns = {usd(by_cap[20].state.cost_usd)}",
        chapter="input 3,431 @8, 88,649 @50, 337,299 @100; ×3.8 input, ×3.7 cost; 20 turns > $0.038",
        notes=[
            f"Quadratic fit of cumulative input tokens over every cap 1–100: {a:.2f}·n² + {b:.1f}·n "
            f"+ {c:.1f}, largest residual {fit_err:.2g} tokens (the growth per turn is constant, so "
            "the sum is exactly quadratic). The curve is the cap-100 run's per-turn bill summed "
            "turn by turn; the four capped runs were each run separately and land on it.",
        ],
        chart=chart,
        checks={
            "every capped run stops max_turns_exceeded at its cap": all(
                r.state.status == "max_turns_exceeded" and r.state.turns == k for k, r in by_cap.items()
            ),
            "input ratio 100/50 within 3.6–4.0": 3.6 <= in_ratio <= 4.0,
            "cost ratio 100/50 within 3.5–4.0": 3.5 <= cost_ratio <= 4.0,
            "separate runs land on the curve": all(
                by_cap[k].state.prompt_tokens == curve_in[k - 1] for k in CAPS
            ),
            "quadratic fits within one token": fit_err < 1.0,
        },
        data={"in_ratio": in_ratio, "cost_ratio": cost_ratio},
    )
