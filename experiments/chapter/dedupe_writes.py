"""7. Dedupe on a write: the naive cache swallows the second of two identical deletes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from experiments.chapter import figures
from experiments.lab.report import Prose, Table
from experiments.lab.runs import Dedupe, Env, Run, run_scenario, summary

NAME = "dedupe_writes"
TITLE = "7 · Naive cache vs read-only gate on `double_delete`"
CH = figures.DEDUPE_WRITES


@dataclass(frozen=True, kw_only=True)
class Measured:
    naive: Run
    """A cache on every tool."""
    gate: Run
    """The cache only on read-only tools."""


def tool_messages(r: Run) -> list[str]:
    return [m.get("content") or "" for m in r.state.messages if m.get("role") == "tool"]


async def measure(env: Env, *, gate: Dedupe = "read-only") -> Measured:
    """`gate` is what the gated row runs with ("all" caches writes too: broken)."""
    naive, gated = await asyncio.gather(
        run_scenario(env, "double_delete", run_id="double-naive", dedupe="all", auto_approve=True),
        run_scenario(env, "double_delete", run_id="double-gate", dedupe=gate, auto_approve=True),
    )
    return Measured(naive=naive, gate=gated)


def _shape(r: Run) -> tuple[int, int, tuple[str, ...]]:
    return r.state.turns, r.tool_runs, tuple(r.runs_of("delete_file"))


def table(m: Measured) -> Table:
    def row(label: str, r: Run, ch: tuple[int, int, tuple[str, ...]]) -> dict:
        return {
            **summary(label, r),
            "deleted": r.runs_of("delete_file"),
            "access.log on disk": (r.sandbox / "access.log").exists(),
            "second result told to the model": tool_messages(r)[1] if len(tool_messages(r)) > 1 else "",
            "chapter": f"{ch[0]} turns, {ch[1]} tool run(s), deleted {json.dumps(list(ch[2]))}",
        }

    return Table(
        rows=[
            row("naive cache on every tool", m.naive, CH.naive),
            row("cache only on read-only tools", m.gate, CH.gate),
        ]
    )


def checks(m: Measured) -> dict[str, bool]:
    naive_told, gate_told = tool_messages(m.naive), tool_messages(m.gate)
    return {
        "naive: 3 turns, 1 tool run, deleted once": _shape(m.naive) == CH.naive,
        "gate: 3 turns, 2 tool runs, deleted twice": _shape(m.gate) == CH.gate,
        "access.log is gone from both sandboxes": not (m.naive.sandbox / "access.log").exists()
        and not (m.gate.sandbox / "access.log").exists(),
        "naive replays the first result; the gate reports the second run's own": len(naive_told) == 2
        and naive_told[0] in naive_told[1]
        and len(gate_told) == 2
        and gate_told[0] not in gate_told[1],
    }


def prose(m: Measured) -> Prose:
    return Prose(
        finding=(
            f"With a cache on every tool the second of two identical deletes silently never runs "
            f"({m.naive.tool_runs} tool run); the read-only gate runs both ({m.gate.tool_runs} tool runs) — "
            "two tool_call_ids are two calls, and only an idempotency key can say they are one."
        ),
        ours=f"naive: {m.naive.state.turns} turns, {m.naive.tool_runs} run; gate: "
        f"{m.gate.state.turns} turns, "
        f"{m.gate.tool_runs} runs",
        chapter=f"naive: {CH.naive[0]} turns, {CH.naive[1]} tool run; gate: {CH.gate[0]} turns, "
        f"{CH.gate[1]} tool runs",
        notes=[
            "`deleted` lists every execution of delete_file. The second execution under the gate "
            "finds the file already gone and says so to the model; the naive cache instead replays "
            "the first result, so the model is told a second deletion succeeded that never ran.",
        ],
    )
