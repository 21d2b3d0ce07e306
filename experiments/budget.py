"""3. Budget overshoot: `runaway` with no turn cap, stopped only by money."""

from __future__ import annotations

import asyncio

import numpy as np

from experiments.common import ACCENT, CHAPTER, LIMIT, OURS, Env, Outcome, figure, run_scenario, usd
from harness import Limits, Pricing

NAME = "budget"
TITLE = "3 · Budget overshoot: `runaway`, no turn cap, three budgets"
BUDGETS = (0.010, 0.020, 0.050)
SWEEP = tuple(round(0.002 + 0.004 * i, 3) for i in range(12))
MODES = {
    "soft (check before the call)": {"budget_check": "before_call"},
    "check after the call": {"budget_check": "after_call"},
    "hard (max_tokens capped)": {"hard_budget": True},
}


async def _spend(env: Env, budget: float, mode: str) -> dict:
    limits = Limits(max_turns=None, max_budget_usd=budget, **MODES[mode])
    r = await run_scenario(env, "runaway", run_id=f"budget-{budget}-{list(MODES).index(mode)}", limits=limits)
    costs = [Pricing().cost(u) for u in r.state.turn_usage]
    spent = r.state.cost_usd
    return {
        "budget_usd": budget,
        "mode": mode,
        "turns": r.state.turns,
        "spent_usd": round(spent, 6),
        "overshoot_usd": round(max(0.0, spent - budget), 6),
        "last_turn_usd": round(costs[-1], 6) if costs else 0.0,
        "last_two_turns_usd": round(sum(costs[-2:]), 6),
        "status": r.state.status,
    }


async def measure(env: Env) -> Outcome:
    jobs = [(b, m) for b in BUDGETS for m in MODES] + [(b, "hard (max_tokens capped)") for b in SWEEP]
    rows = list(await asyncio.gather(*(_spend(env, b, m) for b, m in jobs)))
    main = rows[: len(BUDGETS) * len(MODES)]
    soft = [r for r in main if r["mode"].startswith("soft")]
    after = [r for r in main if r["mode"].startswith("check after")]
    hard = [r for r in rows if r["mode"].startswith("hard")]
    first = soft[0]
    table = [{**r, "chapter": "spent $0.010780" if r is first else ""} for r in main]

    def chart():
        fig, ax = figure("Overshoot past the budget, `runaway`", "budget (USD)", "overshoot (USD)")
        x = np.arange(len(BUDGETS))
        for i, (rows_, color, label) in enumerate(
            (
                (soft, OURS, "soft: before the call"),
                (after, LIMIT, "check after the call"),
                (hard[: len(BUDGETS)], ACCENT, "hard"),
            )
        ):
            ax.bar(
                x + (i - 1) * 0.27, [r["overshoot_usd"] for r in rows_], width=0.27, color=color, label=label
            )
        ax.plot(
            x - 0.27,
            [r["last_turn_usd"] for r in soft],
            "_",
            color=CHAPTER,
            markersize=18,
            label="cost of the last turn",
        )
        for xi, r in zip(x, hard, strict=False):
            label = "$0" if r["overshoot_usd"] == 0 else usd(r["overshoot_usd"])
            ax.annotate(label, (xi + 0.27, 0), ha="center", va="bottom", color=ACCENT, fontsize=9)
        ax.set_xticks(x, [f"${b:.3f}" for b in BUDGETS])
        ax.legend()
        return fig

    return Outcome(
        rows=rows,
        table=table,
        finding=(
            f"Checked before each call, every budget is overshot by less than one turn "
            f"({usd(first['budget_usd'])} → spent {usd(first['spent_usd'])}, chapter $0.010780); "
            f"checked after the call it overshoots by up to two turns, and the hard budget, which "
            f"caps max_tokens from an exact prompt count, never overshoots."
        ),
        ours=f"$0.010 → {usd(first['spent_usd'])} (soft); after-call "
        f"{usd(after[0]['spent_usd'])}; hard max overshoot "
        f"{usd(max(r['overshoot_usd'] for r in hard))}",
        chapter="$0.010 → $0.010780; overshoot ≤ one turn; after the call: two",
        notes=[
            "The soft budget can only be checked before a turn whose price is known after it, so it "
            "bounds the spend to the budget plus one turn. The hard budget counts the prompt with the "
            "provider's own encoder, prices it, and caps `max_tokens` at what the money left buys; "
            f"a sweep of {len(SWEEP)} further budgets ({usd(SWEEP[0])}–{usd(SWEEP[-1])}) is in the CSV.",
        ],
        chart=chart,
        checks={
            "every soft row overshoots": all(r["overshoot_usd"] > 0 for r in soft),
            "soft overshoot < one turn": all(r["overshoot_usd"] <= r["last_turn_usd"] for r in soft),
            "after-call overshoots more, within two turns": all(
                a["overshoot_usd"] > s["overshoot_usd"] and a["overshoot_usd"] <= a["last_two_turns_usd"]
                for a, s in zip(after, soft, strict=True)
            ),
            "hard never overshoots": all(r["spent_usd"] <= r["budget_usd"] for r in hard),
            "every run stops budget_exceeded": all(r["status"] == "budget_exceeded" for r in rows),
        },
    )
