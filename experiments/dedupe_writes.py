"""7. Dedupe on a write: the naive cache swallows the second of two identical deletes."""

from __future__ import annotations

import asyncio

from experiments.common import Env, Outcome, run_scenario, summary
from harness import Limits

NAME = "dedupe_writes"
TITLE = "7 · Naive cache vs read-only gate on `double_delete`"


async def measure(env: Env) -> Outcome:
    common = {"limits": Limits(max_turns=20), "auto_approve": True}
    naive, gate = await asyncio.gather(
        run_scenario(env, "double_delete", run_id="double-naive", dedupe="all", **common),
        run_scenario(env, "double_delete", run_id="double-gate", dedupe="read-only", **common),
    )
    rows = [
        {
            **summary("naive cache on every tool", naive),
            "deleted": naive.runs_of("delete_file"),
            "chapter": '3 turns, 1 tool run, deleted ["access.log"]',
        },
        {
            **summary("cache only on read-only tools", gate),
            "deleted": gate.runs_of("delete_file"),
            "chapter": '3 turns, 2 tool runs, deleted ["access.log","access.log"]',
        },
    ]
    return Outcome(
        rows=rows,
        finding=(
            f"With a cache on every tool the second of two identical deletes silently never runs "
            f"({naive.tool_runs} tool run); the read-only gate runs both ({gate.tool_runs} tool runs) — "
            "two tool_call_ids are two calls, and only an idempotency key can say they are one."
        ),
        ours=f"naive: {naive.state.turns} turns, {naive.tool_runs} run; gate: {gate.state.turns} turns, "
        f"{gate.tool_runs} runs",
        chapter="naive: 3 turns, 1 tool run; gate: 3 turns, 2 tool runs",
        notes=[
            "`deleted` lists every execution of delete_file. The second execution under the gate "
            "finds the file already gone and says so to the model; the naive cache instead replays "
            "the first result, so the model is told a second deletion succeeded that never ran.",
        ],
        checks={
            "naive: 3 turns, 1 tool run": (naive.state.turns, naive.tool_runs) == (3, 1),
            "gate: 3 turns, 2 tool runs": (gate.state.turns, gate.tool_runs) == (3, 2),
            "naive deleted once, gate twice": (naive.runs_of("delete_file"), gate.runs_of("delete_file"))
            == (["access.log"], ["access.log", "access.log"]),
        },
    )
