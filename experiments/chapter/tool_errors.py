"""4. Tool-error wording: one failure, three policies, and only one of them answers."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from experiments.arithmetic import ratios
from experiments.arithmetic.profile import chapter_profile, micro
from experiments.chapter import figures
from experiments.lab.charts import CHAPTER, OURS, cost_bars
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, ErrorWording, Run, reply_tokens, request_tokens, run_scenario, summary

NAME = "tool_errors"
TITLE = "4 · Tool-error wording: `recover` × {fatal, generic, descriptive}"
POLICIES: tuple[ErrorWording, ...] = ("fatal", "generic", "descriptive")
CH = figures.TOOL_ERRORS


@dataclass(frozen=True, kw_only=True)
class Measured:
    runs: dict[str, Run]
    """By the policy's name (the row), whatever wording the run was given."""
    counted_usd: dict[str, float]
    """Each run's cost from our own o200k counts of its requests and replies."""

    def answered(self) -> list[str]:
        return [p for p, r in self.runs.items() if r.state.answer and "errors.log" in r.state.answer]

    def ratio(self) -> float:
        return self.runs["descriptive"].state.cost_usd / self.runs["fatal"].state.cost_usd


def counted_cost(r: Run) -> float:
    return float(micro(sum(request_tokens(r)), sum(reply_tokens(r))) / 1_000_000)


async def recover(env: Env, wording: ErrorWording, run_id: str) -> Run:
    return await run_scenario(env, "recover", run_id=run_id, errors=wording, max_turns=20)


async def measure(env: Env, *, descriptive: ErrorWording = "descriptive") -> Measured:
    """`descriptive` is the wording the descriptive row really gets (another one breaks it)."""
    wordings = {"fatal": "fatal", "generic": "generic", "descriptive": descriptive}
    runs = await asyncio.gather(*(recover(env, wordings[p], f"recover-{p}") for p in POLICIES))
    by = dict(zip(POLICIES, runs, strict=True))
    return Measured(runs=by, counted_usd={p: counted_cost(r) for p, r in by.items()})


def table(m: Measured) -> Table:
    base = m.runs["fatal"].state.cost_usd
    rows = []
    for policy, r in m.runs.items():
        told = next((x["content"] for x in r.state.messages if x.get("role") == "tool"), "")
        rows.append(
            {
                "policy": policy,
                **summary(f"recover, {policy}", r),
                "x_first_row": round(r.state.cost_usd / base, 2),
                "model_was_told": told or f"(run stopped: {r.state.error})",
                "answer": r.state.answer or "",
                "chapter": ("answers; " if policy in CH.answered else "no answer")
                + (f"{CH.descriptive_vs_first}× the first row" if policy == "descriptive" else ""),
            }
        )
    return Table(rows=rows)


def checks(m: Measured) -> dict[str, bool]:
    return {
        "only the descriptive policy answers": m.answered() == list(CH.answered),
        "fatal stops failed": m.runs["fatal"].state.status == "failed",
        "generic completes without the answer": m.runs["generic"].state.status == "completed"
        and "errors.log" not in (m.runs["generic"].state.answer or ""),
        "every cost = our o200k count of what was sent and received": all(
            abs(m.counted_usd[p] - r.state.cost_usd) < 1e-12 for p, r in m.runs.items()
        ),
        "descriptive recovers in four turns and three tool runs": (
            m.runs["descriptive"].state.turns,
            m.runs["descriptive"].tool_runs,
        )
        == (4, 3),
    }


def prose(m: Measured) -> Prose:
    ratio = m.ratio()
    fatal = m.runs["fatal"].state
    shift = ratios.tool_errors(chapter_profile(), m.runs["fatal"], m.runs["descriptive"])
    return Prose(
        finding=(
            f"Only the descriptive policy — the error's own sentence, “Call list_files to see what "
            f"exists.” — lets the model recover and answer; it costs {ratio:.1f}× the fatal row "
            f"(chapter {CH.descriptive_vs_first}×), and the generic “something failed” row survives the "
            "error yet gives up."
        ),
        ours=f"only {', '.join(m.answered()) or 'none'} answers; {ratio:.1f}× the first row",
        chapter=f"only {', '.join(CH.answered)} answers; {CH.descriptive_vs_first}× the first row",
        explained=(
            f"the first row is one turn ({fatal.prompt_tokens} in, {fatal.completion_tokens} out = "
            f"{usd(fatal.cost_usd)}); the ratio is four turns over one, so it moves with the first "
            f"prompt's size: {shift.text()}"
        ),
        notes=[
            "Each row's cost equals our own `o200k_base` count of every request the harness sent and "
            "every reply it received, priced at the chapter's rates: the ratio is arithmetic of the "
            "texts, not of a counter.",
        ],
    )


def chart(m: Measured):
    bars = [
        (
            p,
            m.runs[p].state.cost_usd,
            OURS if p == "descriptive" else CHAPTER,
            f"{usd(m.runs[p].state.cost_usd)}\n{'answered' if p in m.answered() else 'no answer'}",
        )
        for p in POLICIES
    ]
    return cost_bars("Cost of one tool failure, by error policy (`recover`)", "policy", bars)
