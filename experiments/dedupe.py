"""6. Dedupe: a repeated identical call costs a turn, and caching its result saves no money."""

from __future__ import annotations

import asyncio

from experiments.common import CHAPTER, OURS, Env, Outcome, figure, run_scenario, summary, usd
from harness import Limits

NAME = "dedupe"
TITLE = "6 · Dedupe: `once` vs `repeat` vs `repeat` + dedupe"


async def measure(env: Env) -> Outcome:
    limits = Limits(max_turns=20)
    once, repeat, deduped = await asyncio.gather(
        run_scenario(env, "once", run_id="once", limits=limits),
        run_scenario(env, "repeat", run_id="repeat", limits=limits),
        run_scenario(env, "repeat", run_id="repeat-dedupe", limits=limits, dedupe="read-only"),
    )
    extra = repeat.state.cost_usd - once.state.cost_usd
    pct = extra / once.state.cost_usd * 100
    saved = repeat.state.cost_usd - deduped.state.cost_usd
    rows = [
        {**summary("once (baseline)", once), "vs_baseline": "—", "chapter": "baseline"},
        {
            **summary("repeat", repeat),
            "vs_baseline": f"+{usd(extra)} (+{pct:.0f}%)",
            "chapter": "+$0.001050 (+75%)",
        },
        {
            **summary("repeat + dedupe (read-only)", deduped),
            "vs_baseline": f"+{usd(deduped.state.cost_usd - once.state.cost_usd)}",
            "chapter": "saves one tool run and $0",
        },
    ]

    def chart():
        fig, ax = figure("The cost of a repeated call", "run", "cost (USD)")
        labels = ["once", "repeat", "repeat + dedupe"]
        runs = [once, repeat, deduped]
        bars = ax.bar(labels, [r.state.cost_usd for r in runs], color=[CHAPTER, OURS, OURS])
        ax.bar_label(bars, [f"{usd(r.state.cost_usd)}\n{r.tool_runs} tool runs" for r in runs])
        ax.margins(y=0.2)
        return fig

    return Outcome(
        rows=rows,
        finding=(
            f"The repeated call costs +{usd(extra)} (+{pct:.0f}%; chapter +$0.001050, +75%), and "
            f"dedupe saves one tool run and no money (it costs {usd(-saved)} more, the reuse note): "
            f"by the time the harness sees "
            f"the repeat, the model has already been paid to ask."
        ),
        ours=f"+{usd(extra)} (+{pct:.0f}%); dedupe saves {repeat.tool_runs - deduped.tool_runs} "
        f"tool run and {usd(saved)}",
        chapter="+$0.001050 (+75%); dedupe saves one tool run and $0",
        notes=[
            "The deduped call still gets its own tool message under its own `tool_call_id`, saying "
            "the result was reused; those few extra words are why the dedupe row costs a hair more "
            "than the plain repeat rather than exactly the same.",
        ],
        chart=chart,
        checks={
            "the repeat costs more than the baseline": extra > 0,
            "dedupe saves exactly one tool run": repeat.tool_runs - deduped.tool_runs == 1,
            "dedupe saves no money": saved <= 0,
            "same number of turns either way": repeat.state.turns == deduped.state.turns == 3,
        },
    )
