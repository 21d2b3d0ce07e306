"""4. Tool-error wording: one failure, three policies, and only one of them answers."""

from __future__ import annotations

import asyncio

from experiments.common import CHAPTER, OURS, Env, Outcome, figure, run_scenario, summary, usd
from harness import Limits

NAME = "tool_errors"
TITLE = "4 · Tool-error wording: `recover` × {fatal, generic, descriptive}"
POLICIES = ("fatal", "generic", "descriptive")
CHAPTER_ROWS = {"fatal": "no answer", "generic": "no answer", "descriptive": "answers; 4.7× the first row"}


async def recover(env: Env, policy: str, run_id: str | None = None):
    return await run_scenario(
        env, "recover", run_id=run_id or f"recover-{policy}", errors=policy, limits=Limits(max_turns=20)
    )


async def measure(env: Env) -> Outcome:
    runs = dict(zip(POLICIES, await asyncio.gather(*(recover(env, p) for p in POLICIES)), strict=True))
    base = runs["fatal"].state.cost_usd
    rows = []
    for policy, r in runs.items():
        first_tool = next((m["content"] for m in r.state.messages if m.get("role") == "tool"), "")
        rows.append(
            {
                "policy": policy,
                **summary(f"recover, {policy}", r),
                "x_first_row": round(r.state.cost_usd / base, 2),
                "model_was_told": first_tool or f"(run stopped: {r.state.error})",
                "answer": r.state.answer or "",
                "chapter": CHAPTER_ROWS[policy],
            }
        )
    answered = [p for p, r in runs.items() if r.state.answer and "errors.log" in r.state.answer]
    ratio = runs["descriptive"].state.cost_usd / base

    def chart():
        fig, ax = figure("Cost of one tool failure, by error policy (`recover`)", "policy", "cost (USD)")
        costs = [runs[p].state.cost_usd for p in POLICIES]
        bars = ax.bar(POLICIES, costs, color=[CHAPTER, CHAPTER, OURS])
        labels = [
            f"{usd(c)}\n{'answered' if p in answered else 'no answer'}"
            for p, c in zip(POLICIES, costs, strict=True)
        ]
        ax.bar_label(bars, labels, fontsize=8)
        ax.margins(y=0.25)
        return fig

    return Outcome(
        rows=rows,
        finding=(
            f"Only the descriptive policy — the error's own sentence, “Call list_files to see what "
            f"exists.” — lets the model recover and answer; it costs {ratio:.1f}× the fatal row "
            f"(chapter 4.7×), and the generic “something failed” row survives the error yet gives up."
        ),
        ours=f"only {', '.join(answered)} answers; {ratio:.1f}× the first row",
        chapter="only descriptive answers; 4.7× the first row",
        chart=chart,
        checks={
            "only the descriptive policy answers": answered == ["descriptive"],
            "fatal stops failed": runs["fatal"].state.status == "failed",
            "generic completes without the answer": runs["generic"].state.status == "completed",
            "descriptive costs several times the first row": 3.0 <= ratio <= 7.0,
        },
        data={"runs": runs, "ratio": ratio},
    )
