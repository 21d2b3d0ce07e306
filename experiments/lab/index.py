"""`results/README.md`: every finding in one sentence, ours beside the chapter's."""

from __future__ import annotations

from pathlib import Path

from experiments import REGISTRY
from experiments.lab.report import WALL_CLOCK, Outcome, markdown_table

# Written by their own make targets, not by `make experiments`; linked when present.
SIBLINGS = (
    ("real_model.md", "15 · the same harness against a real local model (optional, slow)", "make real-model"),
    ("bench.md", "the lab's own speed: mock vs bare Starlette, harness overhead per turn", "make bench"),
    ("reliability.md", "crash matrix, hostile input and load", "make reliability"),
    ("peers.md", "the exits kit's report card: Agents SDK, pydantic-ai, LangGraph and ours", "make peers"),
    ("distributed.md", "runs shared through PostgreSQL, workers killed and paused: none lost, effects once",
     "make distributed"),
)


def render(outcomes: list[tuple[str, Outcome]], out: Path | None = None) -> str:
    rows = []
    for name, o in outcomes:
        # Wall-clock figures move between reruns: they stay out of the committed files (the index
        # and the steady table), so a rerun leaves the checkout clean.
        timed = o.table.steady is not None
        links = f"[table]({name}.md)" + (f" · [chart]({name}.png)" if o.chart and not timed else "")
        held = "**no**" if o.broken else "yes"
        rows.append(
            {
                "experiment": REGISTRY[name].TITLE,
                "finding": o.prose.headline or o.prose.finding,
                "ours": f"wall-clock: `results/{WALL_CLOCK}/{name}.md`" if timed else o.prose.ours,
                "chapter": o.prose.chapter,
                "the difference, explained": o.prose.explained or "—",
                "holds": held,
                "files": links,
                "command": f"`python -m experiments {name}`",
            }
        )
    return "\n".join(
        [
            "# Results\n",
            "Every measurement of the chapter “Build an agent harness: the loop and the five exits”, "
            "rerun against the scripted provider (`mockprovider`) through the harness (`harness`) over "
            "a loopback socket. Regenerate everything with `make experiments`; this file and every "
            "table, CSV and chart here are written by that command, never by hand.\n",
            "Token counts are real `o200k_base` counts of our own short system prompt and tool "
            "definitions; the chapter's exact prompts are not published, so absolute numbers differ "
            "while the findings and ratios hold. Costs use the chapter's prices: $2.00 per million "
            "input tokens, $12.00 per million output tokens. *Holds* says whether the experiment's "
            "own checks of the finding passed in this run.\n",
            markdown_table(rows),
            *_siblings(out),
        ]
    )


def _siblings(out: Path | None) -> list[str]:
    present = [(f, what, cmd) for f, what, cmd in SIBLINGS if out is not None and (out / f).exists()]
    if not present:
        return []
    lines = [f"- [{f}]({f}): {what} — `{cmd}`" for f, what, cmd in present]
    return ["Also here, each written by its own target:\n", "\n".join(lines) + "\n"]
