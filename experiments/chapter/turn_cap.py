"""2. Turn cap vs cost: `runaway` never answers, so the cap is the only exit, and it is Θ(n²)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from experiments.arithmetic.profile import Profile, chapter_profile
from experiments.chapter import figures
from experiments.lab.charts import CHAPTER, LIMIT, OURS, figure
from experiments.lab.report import Prose, Table, usd, usd_short
from experiments.lab.runs import Env, Run, run_scenario, turn_costs

NAME = "turn_cap"
TITLE = "2 · Turn cap vs cost: `runaway` at caps 8, 20, 50, 100"
CAPS = (8, 20, 50, 100)
CH = figures.TURN_CAP


@dataclass(frozen=True, kw_only=True)
class Measured:
    by_cap: dict[int, Run]
    curve_in: list[int]
    """Input tokens summed turn by turn over the cap-100 run: the bill at every cap."""
    curve_cost: list[float]
    early: Profile
    """Our profile read off the first three turns alone: a, first growth, g, output."""

    def inputs(self, cap: int) -> int:
        return self.by_cap[cap].state.prompt_tokens

    def cost(self, cap: int) -> float:
        return self.by_cap[cap].state.cost_usd


def early_profile(r: Run) -> Profile:
    """a, the first growth and g from the first three prompts; output from the first reply."""
    p = [u.prompt_tokens for u in r.state.turn_usage[:3]]
    out = r.state.turn_usage[0].completion_tokens
    return Profile(first_prompt=p[0], first_growth=p[1] - p[0], growth=p[2] - p[1], output=out)


async def measure(env: Env, *, cap_slack: int = 0) -> Measured:
    """`cap_slack` lets that many turns past the cap (a broken cap, for the tests)."""
    runs = await asyncio.gather(
        *(run_scenario(env, "runaway", run_id=f"runaway-cap{cap}", max_turns=cap + cap_slack) for cap in CAPS)
    )
    by_cap = dict(zip(CAPS, runs, strict=True))
    longest = by_cap[max(CAPS)]
    return Measured(
        by_cap=by_cap,
        curve_in=list(accumulate(u.prompt_tokens for u in longest.state.turn_usage)),
        curve_cost=list(accumulate(turn_costs(longest.state))),
        early=early_profile(longest),
    )


def table(m: Measured) -> Table:
    chapter_in = dict(CH.input_by_cap)
    rows = [
        {
            "cap": cap,
            "turns": r.state.turns,
            "tool_runs": r.tool_runs,
            "input_tokens": r.state.prompt_tokens,
            "output_tokens": r.state.completion_tokens,
            "cost_usd": round(r.state.cost_usd, 6),
            "status": r.state.status,
            "predicted_input_tokens": m.early.input(cap),
            "chapter_input_tokens": chapter_in.get(cap, ""),
            "chapter_cost": f"> {usd_short(CH.cost_20_above_usd)}" if cap == 20 else "",
        }
        for cap, r in m.by_cap.items()
    ]
    curve = [
        {"cap": f"curve:{k}", "input_tokens": i, "cost_usd": round(c, 6)}
        for k, (i, c) in enumerate(zip(m.curve_in, m.curve_cost, strict=True), start=1)
    ]
    return Table(rows=rows + curve, shown=rows)


def checks(m: Measured) -> dict[str, bool]:
    in_ratio, cost_ratio = m.inputs(100) / m.inputs(50), m.cost(100) / m.cost(50)
    return {
        "every capped run stops max_turns_exceeded at its cap": all(
            r.state.status == "max_turns_exceeded" and r.state.turns == k for k, r in m.by_cap.items()
        ),
        "input at every cap = the profile read off the first three turns": all(
            m.inputs(k) == m.early.input(k) for k in CAPS
        ),
        "input ratio 100/50 = what our a/g predicts, and is super-linear": in_ratio
        == m.early.input_ratio(100, 50)
        and 2 < in_ratio < 4,
        "cost ratio 100/50 = what our profile predicts": abs(cost_ratio - m.early.cost_ratio(100, 50)) < 1e-9,
        "separate runs land on the curve": all(m.inputs(k) == m.curve_in[k - 1] for k in CAPS),
    }


def prose(m: Measured) -> Prose:
    in_ratio, cost_ratio = m.inputs(100) / m.inputs(50), m.cost(100) / m.cost(50)
    p, c = m.early, chapter_profile()
    return Prose(
        finding=(
            f"Doubling the cap from 50 to 100 multiplies input tokens by {in_ratio:.2f} and cost by "
            f"{cost_ratio:.2f} (chapter {CH.input_ratio_100_50} and {CH.cost_ratio_100_50}): turn n "
            f"resends every earlier turn, so the bill is Θ(n²), not linear in the cap."
        ),
        ours=f"input {m.inputs(8):,} @8, {m.inputs(50):,} @50, {m.inputs(100):,} @100; "
        f"×{in_ratio:.2f} input, "
        f"×{cost_ratio:.2f} cost; 20 turns = {usd(m.cost(20))}",
        chapter=", ".join(f"{t:,} @{n}" for n, t in CH.input_by_cap)
        + f"; ×{CH.input_ratio_100_50} input, ×{CH.cost_ratio_100_50} cost; 20 turns > "
        f"{usd_short(CH.cost_20_above_usd)}",
        explained=(
            f"ratio {in_ratio:.2f} vs {CH.input_ratio_100_50}: a/g = {p.first_prompt}/{p.growth} "
            f"= {p.first_prompt / p.growth:.2f} for us, {c.first_prompt}/{c.growth} = "
            f"{c.first_prompt / c.growth:.2f} for the chapter; the model "
            "input(n) = n·a + (n−1)·d + g·n(n−1)/2 predicts both ratios exactly (arithmetic)"
        ),
        notes=[
            f"Our profile, read off the first three turns of the cap-100 run alone: first prompt a = "
            f"{p.first_prompt}, turn 2 adds {p.first_growth}, every later turn adds g = {p.growth}, "
            f"{p.output} output tokens per turn. From those four numbers, input(n) = n·a + (n−1)·"
            f"{p.extra_first} + {p.growth}·n(n−1)/2 predicts every cap's input to the token "
            "(column `predicted_input_tokens`), and the 100/50 ratio "
            f"{p.input_ratio(100, 50):.4f}. The chapter's own figures fit the same model with a = "
            f"{c.first_prompt}, g = {c.growth} (ratio {c.input_ratio(100, 50):.4f}): the ratios differ "
            "because a/g differs, see `arithmetic.md`.",
            "The curve is the cap-100 run's per-turn bill summed turn by turn; the four capped runs "
            "were each run separately and land on it (rows `curve:n` of the CSV).",
        ],
    )


def chart(m: Measured):
    fig, ax = figure("`runaway`: input tokens and cost vs turn cap", "turn cap", "input tokens")
    n = np.arange(1, len(m.curve_in) + 1)
    ax.plot(n, m.curve_in, color=OURS, label="input tokens (ours)")
    ax.plot(
        n,
        [m.early.input(int(k)) for k in n],
        color=LIMIT,
        linestyle="--",
        linewidth=1,
        label="profile from turns 1–3",
    )
    ax.scatter(
        [c for c, _ in CH.input_by_cap],
        [t for _, t in CH.input_by_cap],
        color=CHAPTER,
        zorder=3,
        label="chapter",
    )
    ax.scatter(CAPS, [m.inputs(k) for k in CAPS], color=OURS, zorder=3)
    right = ax.twinx()
    right.plot(n, m.curve_cost, color=OURS, alpha=0.35, linestyle=":", label="cost (ours, right)")
    right.set_ylabel("cost (USD)")
    right.grid(False)
    lines, more = ax.get_legend_handles_labels(), right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left")
    return fig
