"""5. A permanent error: `denied` retries a read it may never make until the turn cap stops it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from experiments.arithmetic import ratios
from experiments.arithmetic.profile import Profile, chapter_profile, implied_growth, implied_output
from experiments.chapter import figures
from experiments.chapter.tool_errors import recover
from experiments.chapter.turn_cap import early_profile
from experiments.lab.charts import CHAPTER, LIMIT, OURS, cost_bars
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, Run, run_scenario, summary

NAME = "permanent_error"
TITLE = "5 · Permanent error: `denied`, cap 12 — the turn-cap floor vs stopping with a reason"
CH = figures.DENIED


@dataclass(frozen=True, kw_only=True)
class Measured:
    floor: Run
    """Fed back as data: only the turn cap stops it."""
    stop: Run
    """Classed as permanent: stops `failed` with the reason."""
    recovered: Run
    """`recover` with the descriptive wording, the chapter's yardstick."""
    profile: Profile
    """The floor run's profile, read off its first three turns."""

    def ratio(self) -> float:
        return self.floor.state.cost_usd / self.recovered.state.cost_usd


async def measure(env: Env, *, feed_back_permanent: bool = False, drain_pending: bool = False) -> Measured:
    """`feed_back_permanent=True` feeds the permanent error back in the stopping run too (broken);
    `drain_pending=True` runs the floor's pending call after the cap (broken)."""
    floor, stop, recovered = await asyncio.gather(
        run_scenario(
            env,
            "denied",
            run_id="denied-floor",
            max_turns=CH.turns,
            feed_back_permanent=True,
            drain_pending=drain_pending,
        ),
        run_scenario(
            env, "denied", run_id="denied-stop", max_turns=CH.turns, feed_back_permanent=feed_back_permanent
        ),
        recover(env, "descriptive", "denied-vs-recover"),
    )
    return Measured(floor=floor, stop=stop, recovered=recovered, profile=early_profile(floor))


def table(m: Measured) -> Table:
    def row(label: str, r: Run, chapter_says: str) -> dict:
        return {
            **summary(label, r),
            "answer": r.state.answer or "",
            "error": r.state.error or "",
            "x_recovered_run": round(r.state.cost_usd / m.recovered.state.cost_usd, 2),
            "chapter": chapter_says,
        }

    n = CH.turns
    return Table(
        rows=[
            row(
                "denied, fed back as data (turn cap is the floor)",
                m.floor,
                f"turns={CH.turns} toolruns={CH.tool_runs} in={CH.input_tokens:,} cost={usd(CH.cost_usd)} "
                f'{CH.status} answer=""; {CH.vs_recovered}×',
            ),
            row("denied, permanent error stops the run", m.stop, "—"),
            row("recover, descriptive (the recovered run)", m.recovered, "1×"),
            {
                "run": "predicted for ours (profile of turns 1–3)",
                "turns": n,
                "tools": n - 1,
                "in": m.profile.input(n),
                "out": n * m.profile.output,
                "cost": usd(m.profile.cost(n)),
            },
        ]
    )


def checks(m: Measured) -> dict[str, bool]:
    f, s = m.floor.state, m.stop.state
    return {
        "floor run hits the cap with no answer": (f.status, f.turns, f.answer or "")
        == (CH.status, CH.turns, ""),
        "capped run keeps its last call pending: tool runs = turns − 1": m.floor.tool_runs == f.turns - 1,
        "floor input and cost = its profile from turns 1–3": f.prompt_tokens == m.profile.input(f.turns)
        and abs(f.cost_usd - m.profile.cost(f.turns)) < 1e-12,
        "permanent error stops failed after one turn, saying why": s.status == "failed"
        and s.turns == 1
        and "private.key" in (s.error or ""),
    }


def prose(m: Measured) -> Prose:
    f, c = m.floor.state, chapter_profile()
    growth = implied_growth(CH.input_tokens, CH.turns, c)
    out_per_turn = implied_output(CH.cost_usd, CH.input_tokens, CH.turns)
    return Prose(
        finding=(
            f"Fed back as data, a permission error nobody can fix burns the run to the cap: "
            f"{f.turns} turns, {m.floor.tool_runs} identical tool runs, {usd(f.cost_usd)}, no answer — "
            f"{m.ratio():.1f}× the recovered run (chapter {CH.vs_recovered}×); classed as permanent it "
            f"stops `failed` with the reason after one turn for {usd(m.stop.state.cost_usd)}."
        ),
        ours=f"turns={f.turns} toolruns={m.floor.tool_runs} in={f.prompt_tokens:,} cost={usd(f.cost_usd)} "
        f"{f.status}; {m.ratio():.1f}×; permanent stop {usd(m.stop.state.cost_usd)}",
        chapter=f"turns={CH.turns} toolruns={CH.tool_runs} in={CH.input_tokens:,} cost={usd(CH.cost_usd)} "
        f"{CH.status}; {CH.vs_recovered}×",
        explained=(
            f"the chapter's in={CH.input_tokens:,} is its profile with growth {growth} per turn "
            f"({CH.turns}·{c.first_prompt} + {CH.turns - 1}·{c.extra_first} + "
            f"{CH.turns * (CH.turns - 1) // 2}·{growth}) and {out_per_turn} out per turn; "
            f"ours grows {m.profile.growth} per turn from a first prompt of {m.profile.first_prompt}; "
            f"{ratios.permanent_error(c, m.floor, m.recovered).text()}"
        ),
        notes=[
            f"Our floor run follows its own profile to the token: first prompt {m.profile.first_prompt}, "
            f"then +{m.profile.first_growth}, then +{m.profile.growth} per turn, {m.profile.output} out per "
            f"turn → in = {m.profile.input(CH.turns):,}, cost = {usd(m.profile.cost(CH.turns))} "
            f"at {CH.turns} turns.",
            "Tool runs: the chapter's loop checks the cap at the top of each iteration, before the "
            f"pending call runs, so its call of turn {CH.turns} stays pending ({CH.tool_runs} tool runs) and "
            "the run can resume with it.",
        ],
    )


def chart(m: Measured):
    runs = [
        ("denied\n(turn-cap floor)", m.floor, LIMIT),
        ("denied\n(permanent stop)", m.stop, OURS),
        ("recover\n(descriptive)", m.recovered, CHAPTER),
    ]
    bars = [(label, r.state.cost_usd, color, usd(r.state.cost_usd)) for label, r, color in runs]
    return cost_bars("`denied` vs a recoverable error", "run", bars)
