"""6. Dedupe: a repeated identical call costs a turn, and caching its result saves no money."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from experiments.arithmetic import ratios
from experiments.arithmetic.profile import Profile, chapter_profile, dollars, micro
from experiments.chapter import figures
from experiments.chapter.turn_cap import early_profile
from experiments.lab.charts import CHAPTER, OURS, cost_bars
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Dedupe, Env, Run, run_scenario, summary

NAME = "dedupe"
TITLE = "6 · Dedupe: `once` vs `repeat` vs `repeat` + dedupe"
CH = figures.DEDUPE


@dataclass(frozen=True, kw_only=True)
class Measured:
    once: Run
    repeat: Run
    deduped: Run
    runaway: Profile
    """Our runaway profile (turns 1–3 of a capped run): g is what a repeated list_files adds."""

    @property
    def extra(self) -> float:
        return self.repeat.state.cost_usd - self.once.state.cost_usd

    @property
    def predicted_extra(self) -> float:
        """The repeat's one extra turn: once's second prompt plus the repeated pair, and one call."""
        return repeat_extra(self.once.state.turn_usage[1].prompt_tokens, self.runaway)


def repeat_extra(second_prompt: int, p: Profile) -> float:
    return dollars(micro(second_prompt + p.growth, p.output))


async def measure(env: Env, *, dedupe: Dedupe = "read-only", stable_results: bool = True) -> Measured:
    """`dedupe` is what the deduped row runs with ("off" breaks it); `stable_results=False` gives
    the repeat a tool whose second result differs from its first (broken)."""
    once, repeat, deduped, runaway = await asyncio.gather(
        run_scenario(env, "once", run_id="once"),
        run_scenario(env, "repeat", run_id="repeat", drifting_tools=not stable_results),
        run_scenario(env, "repeat", run_id="repeat-dedupe", dedupe=dedupe),
        run_scenario(env, "runaway", run_id="dedupe-runaway", max_turns=3),
    )
    return Measured(once=once, repeat=repeat, deduped=deduped, runaway=early_profile(runaway))


def table(m: Measured) -> Table:
    once = m.once.state.cost_usd
    pct = m.extra / once * 100
    return Table(
        rows=[
            {
                **summary("once (baseline)", m.once),
                "vs_baseline": "—",
                "predicted for ours": "",
                "chapter": "baseline",
            },
            {
                **summary("repeat", m.repeat),
                "vs_baseline": f"+{usd(m.extra)} (+{pct:.0f}%)",
                "predicted for ours": f"+{usd(m.predicted_extra)}",
                "chapter": f"+{usd(CH.extra_usd)} (+{CH.extra_pct}%)",
            },
            {
                **summary("repeat + dedupe (read-only)", m.deduped),
                "vs_baseline": f"+{usd(m.deduped.state.cost_usd - once)}",
                "predicted for ours": "one tool run fewer, same cost",
                "chapter": f"saves {CH.saved_tool_runs} tool run and {usd(CH.saved_usd)}",
            },
        ]
    )


def checks(m: Measured) -> dict[str, bool]:
    return {
        "the repeat costs exactly one more turn (once's 2nd prompt + g in, one call out)": abs(
            m.extra - m.predicted_extra
        )
        < 1e-12,
        "dedupe saves exactly one tool run": m.repeat.tool_runs - m.deduped.tool_runs == 1,
        "dedupe saves no money": m.deduped.state.cost_usd >= m.repeat.state.cost_usd,
        "same number of turns either way": m.repeat.state.turns == m.deduped.state.turns == 3,
    }


def prose(m: Measured) -> Prose:
    pct = m.extra / m.once.state.cost_usd * 100
    saved = m.repeat.state.cost_usd - m.deduped.state.cost_usd
    c = chapter_profile()
    chapter_predicted = repeat_extra(c.prompt(2), c)
    return Prose(
        finding=(
            f"The repeated call costs +{usd(m.extra)} (+{pct:.0f}%; chapter +{usd(CH.extra_usd)}, "
            f"+{CH.extra_pct}%), and dedupe saves one tool run and no money (it costs {usd(-saved)} more, "
            "the reuse note): by the time the harness sees the repeat, the model has already been "
            "paid to ask."
        ),
        ours=f"+{usd(m.extra)} (+{pct:.0f}%); dedupe saves {m.repeat.tool_runs - m.deduped.tool_runs} "
        f"tool run and {usd(saved)}",
        chapter=f"+{usd(CH.extra_usd)} (+{CH.extra_pct}%); dedupe saves {CH.saved_tool_runs} tool run and "
        f"{usd(CH.saved_usd)}",
        explained=(
            f"the chapter's own profile predicts +{usd(chapter_predicted)} for its repeat, not the "
            f"+{usd(CH.extra_usd)} it prints (+{usd(CH.extra_usd - chapter_predicted)}): its dedupe figure "
            f"is the one that does not follow from its other figures; as a percentage, "
            f"{ratios.dedupe(c, m.once, m.repeat).text()}"
        ),
        notes=[
            "The repeat adds exactly one turn: its prompt is the baseline's second prompt "
            f"({m.once.state.turn_usage[1].prompt_tokens}) plus the repeated call and its result (g = "
            f"{m.runaway.growth}, read off a `runaway` run), and its reply is one {m.runaway.output}-token "
            f"call: +{usd(m.predicted_extra)}, which is what we measure.",
            "The deduped call still gets its own tool message under its own `tool_call_id`, saying "
            "the result was reused; those few extra words are why the dedupe row costs a hair more "
            "than the plain repeat rather than exactly the same.",
        ],
    )


def chart(m: Measured):
    runs = [("once", m.once, CHAPTER), ("repeat", m.repeat, OURS), ("repeat + dedupe", m.deduped, OURS)]
    bars = [
        (label, r.state.cost_usd, color, f"{usd(r.state.cost_usd)}\n{r.tool_runs} tool runs")
        for label, r, color in runs
    ]
    return cost_bars("The cost of a repeated call", "run", bars)
