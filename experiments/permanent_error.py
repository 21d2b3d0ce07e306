"""5. A permanent error: `denied` retries a read it may never make until the turn cap stops it."""

from __future__ import annotations

import asyncio

from experiments.common import CHAPTER, LIMIT, OURS, Env, Outcome, figure, run_scenario, summary, usd
from experiments.tool_errors import recover
from harness import Limits

NAME = "permanent_error"
TITLE = "5 · Permanent error: `denied`, cap 12 — the turn-cap floor vs stopping with a reason"


async def measure(env: Env) -> Outcome:
    floor, stop, recovered = await asyncio.gather(
        run_scenario(
            env, "denied", run_id="denied-floor", limits=Limits(max_turns=12), stop_on_permanent=False
        ),
        run_scenario(env, "denied", run_id="denied-stop", limits=Limits(max_turns=12)),
        recover(env, "descriptive", run_id="denied-vs-recover"),
    )
    ratio = floor.state.cost_usd / recovered.state.cost_usd
    rows = [
        {
            **summary("denied, fed back as data (turn cap is the floor)", floor),
            "answer": floor.state.answer or "",
            "error": floor.state.error or "",
            "x_recovered_run": round(ratio, 2),
            "chapter": 'turns=12 toolruns=11 in=7,079 cost=$0.018622 max_turns_exceeded answer=""; 5.2×',
        },
        {
            **summary("denied, permanent error stops the run", stop),
            "answer": stop.state.answer or "",
            "error": stop.state.error or "",
            "x_recovered_run": round(stop.state.cost_usd / recovered.state.cost_usd, 2),
            "chapter": "—",
        },
        {
            **summary("recover, descriptive (the recovered run)", recovered),
            "answer": recovered.state.answer or "",
            "error": "",
            "x_recovered_run": 1.0,
            "chapter": "1×",
        },
    ]

    def chart():
        fig, ax = figure("`denied` vs a recoverable error", "run", "cost (USD)")
        labels = ["denied\n(turn-cap floor)", "denied\n(permanent stop)", "recover\n(descriptive)"]
        costs = [floor.state.cost_usd, stop.state.cost_usd, recovered.state.cost_usd]
        bars = ax.bar(labels, costs, color=[LIMIT, OURS, CHAPTER])
        ax.bar_label(bars, [usd(c) for c in costs])
        return fig

    return Outcome(
        rows=rows,
        finding=(
            f"Fed back as data, a permission error nobody can fix burns the run to the cap: "
            f"{floor.state.turns} turns, {floor.tool_runs} identical tool runs, {usd(floor.state.cost_usd)}, "
            f"no answer — {ratio:.1f}× the recovered run (chapter 5.2×); classed as permanent it stops "
            f"`failed` with the reason after one turn for {usd(stop.state.cost_usd)}."
        ),
        ours=f"turns={floor.state.turns} toolruns={floor.tool_runs} in={floor.state.prompt_tokens:,} "
        f"cost={usd(floor.state.cost_usd)} {floor.state.status}; {ratio:.1f}×; permanent stop "
        f"{usd(stop.state.cost_usd)}",
        chapter="turns=12 toolruns=11 in=7,079 cost=$0.018622 max_turns_exceeded; 5.2×",
        notes=[
            "Tool runs: 12 where the chapter printed 11. Our loop runs what the transcript shows as "
            "pending before it checks the turn cap (SPEC §2), so the twelfth turn's call is executed "
            "before the cap stops the run; the chapter's loop checked the cap first.",
        ],
        chart=chart,
        checks={
            "floor run hits the cap with no answer": floor.state.status == "max_turns_exceeded"
            and floor.state.turns == 12
            and not floor.state.answer,
            "costs several times the recovered run": 3.0 <= ratio <= 8.0,
            "permanent error stops failed after one turn": stop.state.status == "failed"
            and stop.state.turns == 1,
        },
    )
