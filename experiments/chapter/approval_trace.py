"""12. The trace: one JSON object per line, the run id on every line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import accumulate

from experiments.arithmetic.profile import call_tokens, chapter_profile, dollars, micro
from experiments.chapter import figures
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, Run, memory_trace, reply_tokens, request_tokens, run_scenario
from harness import MemoryTrace

NAME = "trace"
TITLE = "12 · Trace of a run stopped for approval (`destructive`)"
EXPECTED = ["turn", "tool_start", "tool_result", "turn", "approval_required", "run_stopped"]
WALL_CLOCK_KEYS = ("ms",)
"""Wall time in a trace line; shown as null here so a rerun does not change this file."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    run: Run
    events: list[dict]
    counted: list[tuple[int, int, float]]
    """Per turn: our count of the prompt sent, of the reply, and the cumulative cost they make."""


def steady(event: dict) -> dict:
    return {k: (None if k in WALL_CLOCK_KEYS else v) for k, v in event.items()}


async def measure(env: Env, *, trace: MemoryTrace | None = None) -> Measured:
    """`trace` is the sink the harness writes to (one that drops fields breaks the finding)."""
    r = await run_scenario(env, "destructive", run_id="n1", trace=trace or memory_trace())
    prompts, replies = request_tokens(r), reply_tokens(r)
    cumulative = list(accumulate(micro(p, c) for p, c in zip(prompts, replies, strict=True)))
    counted = [(p, c, dollars(x)) for p, c, x in zip(prompts, replies, cumulative, strict=True)]
    return Measured(run=r, events=list(r.trace.events), counted=counted)


def table(m: Measured) -> Table:
    rows = [
        {"line": i + 1, "type": e["type"], "json": json.dumps(steady(e), separators=(",", ":"))}
        for i, e in enumerate(m.events)
    ]
    return Table(rows=rows, shown=[{"line": r["line"], "type": r["type"]} for r in rows])


def checks(m: Measured) -> dict[str, bool]:
    turns = [e for e in m.events if e["type"] == "turn"]
    last = m.events[-1] if m.events else {}
    return {
        "the six event types in order": [e["type"] for e in m.events] == EXPECTED,
        "the run id on every line": all(e.get("runId") == m.run.state.run_id for e in m.events),
        "turn lines: tokens = our count of what was sent, cost cumulative": len(turns) == len(m.counted)
        and all(
            (e.get("prompt_tokens"), e.get("completion_tokens")) == (p, c)
            and abs(e.get("costUsd", -1) - cost) < 1e-12
            for e, (p, c, cost) in zip(turns, m.counted, strict=False)
        ),
        # Independent of o200k: the chapter's printed counts for the same two calls.
        "turn lines: completion tokens = the chapter's printed trace": [
            e.get("completion_tokens") for e in turns
        ]
        == [e["completion_tokens"] for e in figures.trace_events() if e["type"] == "turn"],
        "run_stopped says why, with the turns and the cost": (
            last.get("status"),
            last.get("reason"),
            last.get("turns"),
        )
        == ("interrupted", "approval", len(turns))
        and last.get("costUsd") == (turns[-1].get("costUsd") if turns else None),
    }


def prose(m: Measured) -> Prose:
    events = ", ".join(e["type"] for e in m.events)
    chapter_turns = [e for e in figures.trace_events() if e["type"] == "turn"]
    ours = [e for e in m.events if e["type"] == "turn"]
    c = chapter_profile()
    return Prose(
        finding=(
            f"A run stopped for approval leaves {len(m.events)} trace lines — {events} — each carrying the "
            "run id, each `turn` line its own tokens and the cumulative cost, and `run_stopped` the reason."
        ),
        ours=f"{len(m.events)} lines: {events}; turn costs "
        + ", ".join(usd(e.get("costUsd", 0.0)) for e in ours),
        chapter=f"{len(figures.trace_events())} lines: "
        f"{', '.join(e['type'] for e in figures.trace_events())}; "
        "turn costs " + ", ".join(usd(e["costUsd"]) for e in chapter_turns),
        explained=(
            f"turn costs: the chapter's are its profile's first two turns ({c.prompt(1)} in + "
            f"{c.output} out, "
            f"then {c.prompt(2)} + {call_tokens(figures.DELETE_ACCESS)}: {usd(c.cost(1))}, "
            f"{usd(dollars(c.cost_micro(1) + micro(c.prompt(2), call_tokens(figures.DELETE_ACCESS))))}); "
            "ours are our counts of our own prompts (arithmetic)"
        ),
        notes=[
            "Ours (the `ms` of `tool_result` is wall time; it is shown as null so this file is the same "
            "on every rerun):\n\n```jsonl\n"
            + "\n".join(json.dumps(steady(e), separators=(",", ":")) for e in m.events)
            + "\n```",
            "The chapter's:\n\n```jsonl\n" + figures.TRACE_LINES + "\n```",
        ],
    )
