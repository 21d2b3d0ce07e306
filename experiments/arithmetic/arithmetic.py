"""The chapter's arithmetic: its figures are one token profile, and so are ours.

Fitting input(n) = n·a + (n−1)·d + g·n(n−1)/2 (`profile.py`) to the chapter's runaway table gives
whole tokens; from that profile and the `o200k_base` counts of the chapter's own tool calls, its
other figures are marked predicted (and consistent or not), restated (a fit point, or its own
printed numbers recombined: true by construction) or not predicted. Our profile is read off our
first three turns alone, so our cap totals and the cap-100/cap-50 ratio — a function of a/g (and
d/g) — are predictions, checked against the runs; `ratios.py` puts numbers on the three cost
ratios that differ from the chapter's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

import o200k
from experiments.arithmetic import ratios
from experiments.arithmetic.predictions import (
    BUDGET,
    DENIED_PENDING,
    Prediction,
    chapter_predictions,
    dedupe_gap,
    ours_runaway,
    ours_tasks,
)
from experiments.arithmetic.profile import (
    IN_MICRO,
    OUT_MICRO,
    Profile,
    call_tokens,
    chapter_profile,
    fit,
    ratio_curve,
)
from experiments.chapter import figures
from experiments.chapter.tool_errors import recover
from experiments.chapter.turn_cap import early_profile
from experiments.lab.charts import CHAPTER, LIMIT, OURS, figure
from experiments.lab.report import Prose, Table
from experiments.lab.runs import BudgetCheck, Env, Run, run_scenario

NAME = "arithmetic"
TITLE = "16 · The chapter's arithmetic: one token profile predicts its figures, and ours"
OUR_FIT_CAPS = (8, 20, 50)
"""A second, independent fit of ours (cap totals, not per-turn prompts), WITHOUT cap 100: it must
land on the profile turns 1–3 show, and cap 100 stays a prediction for both."""
PREDICTED_CAP = 100


@dataclass(frozen=True, kw_only=True)
class Measured:
    chapter: Profile
    ours: Profile
    """Read off the first three per-turn prompts of the cap-8 run (not off any cap's total)."""
    caps_fit: Profile | None
    """The profile through our caps 8, 20, 50; None when they fit no whole-token profile."""
    caps: dict[int, Run]
    budget: Run
    plan: Run
    once: Run
    repeat: Run
    denied: Run
    fatal: Run
    recovered: Run
    """`recover` with the fatal and the descriptive wording (tool_errors' two rows)."""


async def measure(
    env: Env, *, budget_check: BudgetCheck = "before_call", drain_pending: bool = False
) -> Measured:
    """`budget_check="after_call"` runs the budget with the order of checks broken, and
    `drain_pending=True` runs the capped `denied` run's pending call after the cap (both for the tests)."""
    caps = (*OUR_FIT_CAPS, PREDICTED_CAP)
    runs = await asyncio.gather(
        *(run_scenario(env, "runaway", run_id=f"arith-cap{n}", max_turns=n) for n in caps),
        run_scenario(
            env,
            "runaway",
            run_id="arith-budget",
            max_turns=None,
            budget_usd=BUDGET,
            budget_check=budget_check,
        ),
        run_scenario(env, "plan", run_id="arith-plan"),
        run_scenario(env, "once", run_id="arith-once"),
        run_scenario(env, "repeat", run_id="arith-repeat"),
        run_scenario(
            env,
            "denied",
            run_id="arith-denied",
            max_turns=figures.DENIED.turns,
            feed_back_permanent=True,
            drain_pending=drain_pending,
        ),
        recover(env, "fatal", "arith-fatal"),
        recover(env, "descriptive", "arith-recovered"),
    )
    by_cap = dict(zip(caps, runs[: len(caps)], strict=True))
    budget, plan, once, repeat, denied, fatal, recovered = runs[len(caps) :]
    return Measured(
        chapter=chapter_profile(),
        ours=early_profile(by_cap[OUR_FIT_CAPS[0]]),
        caps_fit=_fit_or_none(by_cap),
        caps=by_cap,
        budget=budget,
        plan=plan,
        once=once,
        repeat=repeat,
        denied=denied,
        fatal=fatal,
        recovered=recovered,
    )


def _fit_or_none(by_cap: dict[int, Run]) -> Profile | None:
    """Our caps 8, 20, 50 fitted; a bad fit is a finding (a check turns false), not a crash."""
    try:
        return fit(
            {n: by_cap[n].state.prompt_tokens for n in OUR_FIT_CAPS},
            output=by_cap[OUR_FIT_CAPS[0]].state.turn_usage[0].completion_tokens,
        )
    except ValueError:
        return None


def measured_ratio(m: Measured) -> float:
    return m.caps[PREDICTED_CAP].state.prompt_tokens / m.caps[50].state.prompt_tokens


def our_predictions(m: Measured) -> list[Prediction]:
    return ours_runaway(m.ours, m.caps, m.budget) + ours_tasks(m.ours, m.plan, m.once, m.repeat, m.denied)


def _row(who: str, x: Prediction) -> dict:
    return {
        "profile": who,
        "figure": x.figure,
        "printed / measured": x.printed,
        "predicted": x.predicted,
        "how": x.how,
        "verdict": x.verdict,
        "consistent": "yes" if x.consistent else "**no**",
        "difference": x.difference,
    }


def table(m: Measured) -> Table:
    rows = [_row("chapter", x) for x in chapter_predictions(m.chapter)]
    rows += [_row("ours", x) for x in our_predictions(m)]
    rows += [_row("ours at the chapter's a", ratios.prediction(x)) for x in ratio_shifts(m)]
    return Table(rows=rows)


def ratio_shifts(m: Measured) -> list[ratios.Ratio]:
    """The three ratios the index explains: ours, and ours with the chapter's first prompt."""
    c = m.chapter
    return [
        ratios.tool_errors(c, m.fatal, m.recovered),
        ratios.permanent_error(c, m.denied, m.recovered),
        ratios.dedupe(c, m.once, m.repeat),
    ]


def _profile_text(p: Profile) -> str:
    return (
        f"a = {p.first_prompt}, turn 2 adds {p.first_growth}, then g = {p.growth} per turn, "
        f"{p.output} out per turn (a/g = {p.first_prompt / p.growth:.2f})"
    )


EXPECTED_MISSES = ("plan output tokens", "dedupe: the repeat's extra cost")
"""The chapter figures its profile does not predict: its answer counts one token more than its
text, and its dedupe figure is +$0.000108 over one more turn of its own runs."""


def checks(m: Measured) -> dict[str, bool]:
    c, ours = chapter_predictions(m.chapter), our_predictions(m)
    return {
        "its profile predicts every other figure but the plan answer's count and dedupe": tuple(
            x.figure for x in c if not x.consistent
        )
        == EXPECTED_MISSES,
        "our profile predicts our token and cost figures": all(
            x.consistent for x in ours if x.figure != DENIED_PENDING
        ),
        # exactly one such row, and it holds: a renamed row must not make this vacuously true
        "a capped run keeps its last call pending (denied: tool runs = turns − 1)": [
            x.consistent for x in ours if x.figure == DENIED_PENDING
        ]
        == [True],
        f"our turns 1–3 predict our cap-{PREDICTED_CAP} input and the {PREDICTED_CAP}/50 ratio": m.caps[
            PREDICTED_CAP
        ].state.prompt_tokens
        == m.ours.input(PREDICTED_CAP)
        and measured_ratio(m) == m.ours.input_ratio(PREDICTED_CAP, 50),
        "our caps 8, 20, 50 fit one whole-token profile, the one turns 1–3 show": m.caps_fit == m.ours,
        "the chapter's first prompt (and its printed denied and dedupe costs) give its three ratios": all(
            ratios.explains(x) for x in ratio_shifts(m)
        ),
    }


def prose(m: Measured) -> Prose:
    c, o = m.chapter, m.ours
    rows = chapter_predictions(m.chapter)
    misses = [x for x in rows if not x.consistent]
    predicted = [x for x in rows if x.verdict == "predicted"]
    held = sum(x.consistent for x in predicted)
    return Prose(
        finding=(
            f"The chapter's runaway table fits one profile in whole tokens — {_profile_text(c)}; "
            f"from it and the counted tool calls, {len(predicted)} of its {len(rows)} rows are "
            f"predictions (the rest restate a fit point or its own printed numbers, or are only "
            f"bounded) and {held} of those hold to the token or the micro-dollar; "
            f"{', '.join(x.figure for x in misses)} do not. Ours, read off our first three "
            f"turns, is {_profile_text(o)}: it predicted our cap-100/cap-50 ratio "
            f"{o.input_ratio(100, 50):.4f} before cap 100 was looked at, and we measured "
            f"{measured_ratio(m):.4f}; the chapter's a/g gives its {c.input_ratio(100, 50):.2f}."
        ),
        ours=f"a={o.first_prompt} +{o.first_growth} g={o.growth} out={o.output}; ratio predicted "
        f"{o.input_ratio(100, 50):.4f}, measured {measured_ratio(m):.4f}",
        chapter=f"a={c.first_prompt} +{c.first_growth} g={c.growth} out={c.output}; ratio "
        f"{c.input_ratio(100, 50):.4f}",
        explained="; ".join(f"{x.figure}: {x.difference}" for x in misses if x.difference),
        notes=[
            "input(n) = n·a + (n−1)·d + g·n(n−1)/2, with d = (turn 2's growth) − g, is linear in (a, d, g): "
            "three printed totals solve it exactly, and a solution in whole tokens is itself the first "
            f"check that the figures are one model. Costs are integer micro-dollars ({IN_MICRO} per input "
            f"token, {OUT_MICRO} per output token), so a prediction either equals a printed figure or it "
            "does not.",
            f"The chapter's plan answer (“{figures.PLAN.answer}”) "
            f"is {o200k.count(figures.PLAN.answer)} tokens of `o200k_base`; its output of "
            f"{figures.PLAN.output_tokens} needs "
            f"{figures.PLAN.output_tokens - m.chapter.output - call_tokens(figures.READ_ERRORS)}. "
            f"Its dedupe figure needs a third prompt {dedupe_gap(m.chapter)} tokens longer than its own "
            "runs make.",
            "The chart: input(100)/input(50) as a function of a/g. A run that is all growth (a/g → 0) "
            f"gives 100·99 / (50·49) = {ratio_curve(0):.2f}; the larger the first prompt against what "
            f"each turn adds, the closer to 2 (the curve takes d = 0; the chapter's "
            f"d = {m.chapter.extra_first} "
            f"moves its point by {_d_shift(m.chapter):.4f}).",
        ],
    )


def _d_shift(p: Profile) -> float:
    """How far d (turn 2's extra growth) moves a profile off the d = 0 ratio curve."""
    x = p.first_prompt / p.growth
    return abs(ratio_curve(x, p.extra_first / p.growth) - ratio_curve(x))


def chart(m: Measured):
    fig, ax = figure(
        "Cap-100 / cap-50 input ratio vs a/g",
        "a / g (first prompt over growth per turn)",
        "input(100) / input(50)",
    )
    xs = np.linspace(0, 12, 241)
    ax.plot(xs, [ratio_curve(x) for x in xs], color=LIMIT, linewidth=1, label="input(n) = n·a + g·n(n−1)/2")
    # The chapter's point is its own table (fitted through it); ours is predicted from turns 1–3,
    # and the measured ratio is drawn over it: a miss would show as two markers apart.
    points = (
        (m.chapter, m.chapter.input_ratio(100, 50), CHAPTER, "o", "chapter (its table)"),
        (m.ours, m.ours.input_ratio(100, 50), OURS, "o", "ours, predicted from turns 1–3"),
        (m.ours, measured_ratio(m), LIMIT, "x", "ours, measured"),
    )
    for p, ratio, color, marker, who in points:
        ax.scatter(
            [p.first_prompt / p.growth],
            [ratio],
            color=color,
            marker=marker,
            zorder=3,
            label=f"{who}: a/g = {p.first_prompt}/{p.growth}, ratio {ratio:.2f}",
        )
    ax.axhline(ratio_curve(0), color=CHAPTER, linestyle=":", linewidth=1)
    ax.axhline(2, color=CHAPTER, linestyle=":", linewidth=1)
    ax.legend()
    return fig
