"""3. Budget overshoot: `runaway` with no turn cap, stopped only by money."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

import numpy as np

from experiments.arithmetic.profile import Profile, chapter_profile
from experiments.chapter import figures
from experiments.chapter.turn_cap import early_profile
from experiments.lab.charts import ACCENT, CHAPTER, LIMIT, OURS, figure
from experiments.lab.report import Prose, Table, usd, usd_short
from experiments.lab.runs import BudgetCheck, Env, run_scenario, turn_costs

NAME = "budget"
TITLE = "3 · Budget overshoot: `runaway`, no turn cap, three budgets"
BUDGETS = (0.010, 0.020, 0.050)
SWEEP = tuple(round(0.002 + 0.004 * i, 3) for i in range(12))
Mode = Literal["soft", "after", "hard"]
MODE_LABEL: dict[Mode, str] = {
    "soft": "soft (check before the call)",
    "after": "check after the call",
    "hard": "hard (max_tokens capped)",
}
CH = figures.BUDGET


@dataclass(frozen=True, kw_only=True)
class Spend:
    budget_usd: float
    mode: Mode
    turns: int
    spent_usd: float
    turn_costs: list[float]
    status: str

    @property
    def overshoot_usd(self) -> float:
        return max(0.0, self.spent_usd - self.budget_usd)


@dataclass(frozen=True, kw_only=True)
class Measured:
    spends: list[Spend]
    profile: Profile
    """Our runaway profile, read off the first three turns of the $0.010 soft run."""

    def of(self, mode: Mode, sweep: bool = False) -> list[Spend]:
        rows = [s for s in self.spends if s.mode == mode]
        return rows if sweep else [s for s in rows if s.budget_usd in BUDGETS][: len(BUDGETS)]


async def _spend(env: Env, budget: float, mode: Mode, check: BudgetCheck, i: int) -> tuple[Spend, object]:
    r = await run_scenario(
        env,
        "runaway",
        run_id=f"budget-{budget}-{mode}-{i}",
        max_turns=None,
        budget_usd=budget,
        budget_check="after_call" if mode == "after" else check,
        hard_budget=mode == "hard",
    )
    s = r.state
    return Spend(
        budget_usd=budget,
        mode=mode,
        turns=s.turns,
        spent_usd=s.cost_usd,
        turn_costs=turn_costs(s),
        status=s.status,
    ), r


async def measure(env: Env, *, soft_check: BudgetCheck = "before_call") -> Measured:
    """`soft_check="after_call"` breaks the soft budget's order of checks (for the tests)."""
    jobs = [(b, m) for b in BUDGETS for m in MODE_LABEL] + [(b, "hard") for b in SWEEP]
    done = await asyncio.gather(*(_spend(env, b, m, soft_check, i) for i, (b, m) in enumerate(jobs)))
    first_soft = next(r for s, r in done if s.mode == "soft")
    return Measured(spends=[s for s, _ in done], profile=early_profile(first_soft))


def table(m: Measured) -> Table:
    def row(s: Spend) -> dict:
        return {
            "budget_usd": s.budget_usd,
            "mode": MODE_LABEL[s.mode],
            "turns": s.turns,
            "spent_usd": round(s.spent_usd, 6),
            "overshoot_usd": round(s.overshoot_usd, 6),
            "last_turn_usd": round(s.turn_costs[-1], 6) if s.turn_costs else 0.0,
            "last_two_turns_usd": round(sum(s.turn_costs[-2:]), 6),
            "status": s.status,
        }

    main = [s for b in BUDGETS for mode in MODE_LABEL for s in m.of(mode) if s.budget_usd == b]
    shown = []
    for s in main:
        predicted = _predicted(m.profile, s)
        chapter_says = (
            f"spent {usd(CH.spent_usd)}" if (s.mode, s.budget_usd) == ("soft", CH.budget_usd) else ""
        )
        shown.append({**row(s), "predicted for ours": predicted, "chapter": chapter_says})
    return Table(rows=[row(s) for s in m.spends], shown=shown)


def _predicted(p: Profile, s: Spend) -> str:
    if s.mode == "hard":
        return f"≤ {usd(s.budget_usd)}"
    n = p.soft_budget_turns(s.budget_usd) + (1 if s.mode == "after" else 0)
    return f"{n} turns, {usd(p.cost(n))}"


def checks(m: Measured) -> dict[str, bool]:
    soft, after, hard = m.of("soft"), m.of("after"), m.of("hard", sweep=True)
    p = m.profile
    return {
        "soft: turns and spend = what our profile predicts": all(
            s.turns == p.soft_budget_turns(s.budget_usd) and abs(s.spent_usd - p.cost(s.turns)) < 1e-12
            for s in soft
        ),
        "soft: every row overshoots, by less than its last turn": all(
            0 < s.overshoot_usd <= s.turn_costs[-1] for s in soft
        ),
        "after the call: one turn more than soft, within two turns": all(
            a.turns == s.turns + 1 and a.overshoot_usd <= sum(a.turn_costs[-2:])
            for a, s in zip(after, soft, strict=True)
        ),
        "hard never overshoots": all(s.spent_usd <= s.budget_usd for s in hard),
        "every run stops budget_exceeded": all(s.status == "budget_exceeded" for s in m.spends),
    }


def prose(m: Measured) -> Prose:
    soft, after, hard = m.of("soft"), m.of("after"), m.of("hard", sweep=True)
    first, c = soft[0], chapter_profile()
    n_ch = c.soft_budget_turns(CH.budget_usd)
    return Prose(
        finding=(
            f"Checked before each call, every budget is overshot by less than one turn "
            f"({usd_short(first.budget_usd)} → spent {usd(first.spent_usd)}, chapter {usd(CH.spent_usd)}); "
            f"checked after the call it runs one turn more, and the hard budget, which caps max_tokens "
            f"from an exact prompt count, never overshoots."
        ),
        ours=f"{usd_short(first.budget_usd)} → {usd(first.spent_usd)} in {first.turns} turns "
        "(soft); after-call "
        f"{usd(after[0].spent_usd)}; hard max overshoot {usd(max(s.overshoot_usd for s in hard))}",
        chapter=f"{usd_short(CH.budget_usd)} → {usd(CH.spent_usd)}; overshoot ≤ one turn; after the "
        "call: two",
        explained=(
            f"the chapter's profile stops at {n_ch} turns, {usd(c.cost(n_ch))}; ours at "
            f"{first.turns} turns, {usd(m.profile.cost(first.turns))} (arithmetic)"
        ),
        notes=[
            "The soft budget can only be checked before a turn whose price is known after it, so it "
            "bounds the spend to the budget plus one turn. Our runaway profile (first prompt "
            f"{m.profile.first_prompt}, growth {m.profile.first_growth} then {m.profile.growth}, "
            f"{m.profile.output} out per turn) predicts each soft row's turns and spend to the micro-dollar "
            "(column `predicted for ours`), and the after-call row one turn later. The hard budget counts "
            "the prompt with the provider's own encoder, prices it, and caps `max_tokens` at what the "
            f"money left buys; a sweep of {len(SWEEP)} further budgets ({usd(SWEEP[0])}–{usd(SWEEP[-1])}) "
            "is in the CSV.",
        ],
    )


def chart(m: Measured):
    soft, after, hard = m.of("soft"), m.of("after"), m.of("hard")
    fig, ax = figure("Overshoot past the budget, `runaway`", "budget (USD)", "overshoot (USD)")
    x = np.arange(len(BUDGETS))
    for i, (rows, color, label) in enumerate(
        (
            (soft, OURS, "soft: before the call"),
            (after, LIMIT, "check after the call"),
            (hard, ACCENT, "hard"),
        )
    ):
        ax.bar(x + (i - 1) * 0.27, [s.overshoot_usd for s in rows], width=0.27, color=color, label=label)
    ax.plot(
        x - 0.27,
        [s.turn_costs[-1] for s in soft],
        "_",
        color=CHAPTER,
        markersize=18,
        label="cost of the last turn",
    )
    for xi, s in zip(x, hard, strict=False):
        label = "$0" if s.overshoot_usd == 0 else usd(s.overshoot_usd)
        ax.annotate(label, (xi + 0.27, 0), ha="center", va="bottom", color=ACCENT, fontsize=9)
    ax.set_xticks(x, [f"${b:.3f}" for b in BUDGETS])
    ax.legend()
    return fig
