"""14. A sub-agent behind one tool: its own transcript, its own limits, the parent's signal."""

from __future__ import annotations

import asyncio
import time

from experiments.common import Env, Outcome, options, run_scenario, usd
from harness import Cancel, Limits
from harness.catalog import ListFiles, ReadFile, Research

NAME = "subagent"
TITLE = "14 · Sub-agent: `research` — own transcript, own limits, one Stop cancels the tree"


def _tools(research: Research) -> list:
    return [ListFiles(), ReadFile(), research]


async def _stopped_tree(env: Env) -> dict:
    """Stop the parent while its child waits on a slow provider turn."""
    cancel = Cancel()
    opts = options(env, "research", "tree", limits=Limits(max_turns=5), cancel=cancel)
    slow_child = Research(model="plan+latency=400")
    t0 = time.perf_counter()

    async def press_stop() -> float:
        await asyncio.sleep(0.6)
        cancel.set("user pressed Stop")
        return time.perf_counter()

    presser = asyncio.create_task(press_stop())
    r = await run_scenario(env, "research", run_id="tree", opts=opts, tools=_tools(slow_child))
    pressed = await presser
    stops = {e["runId"]: e for e in r.trace.events if e["type"] == "run_stopped"}
    return {
        "run": r,
        "stops": stops,
        "gap_ms": (time.perf_counter() - pressed) * 1000,
        "total_ms": (time.perf_counter() - t0) * 1000,
    }


async def measure(env: Env) -> Outcome:
    normal, runaway_child, tree = await asyncio.gather(
        run_scenario(env, "research", run_id="parent", limits=Limits(max_turns=5), tools=_tools(Research())),
        run_scenario(
            env,
            "research",
            run_id="parent-runaway-child",
            limits=Limits(max_turns=5),
            tools=_tools(Research(model="runaway", max_turns=6)),
        ),
        _stopped_tree(env),
    )
    s = normal.state
    child_events = [e for e in normal.trace.events if e["runId"] != s.run_id]
    child_turns = [e for e in child_events if e["type"] == "turn"]
    details = s.tool_runs[0].details
    wild = runaway_child.state
    wild_details = wild.tool_runs[0].details
    tree_stops = tree["stops"]
    rows = [
        {
            "run": "research (child runs `plan`)",
            "parent_turns": s.turns,
            "parent_messages": len(s.messages),
            "parent_cost": usd(s.cost_usd),
            "child_turns": details.get("child_turns"),
            "child_cost": usd(details.get("child_cost_usd", 0.0)),
            "child_status": details.get("child_status"),
            "parent_status": s.status,
            "answer": s.answer or "",
        },
        {
            "run": "child is a runaway (cap 6)",
            "parent_turns": wild.turns,
            "parent_messages": len(wild.messages),
            "parent_cost": usd(wild.cost_usd),
            "child_turns": wild_details.get("child_turns"),
            "child_cost": usd(wild_details.get("child_cost_usd", 0.0)),
            "child_status": wild_details.get("child_status"),
            "parent_status": wild.status,
            "answer": wild.answer or "",
        },
        {
            "run": "Stop at 0.6 s while the child waits",
            "parent_turns": tree["run"].state.turns,
            "parent_messages": len(tree["run"].state.messages),
            "parent_cost": usd(tree["run"].state.cost_usd),
            "child_turns": "",
            "child_cost": "",
            "child_status": "/".join(str(v["status"]) for k, v in tree_stops.items() if k != "tree"),
            "parent_status": tree["run"].state.status,
            "answer": "",
        },
    ]
    leaked = [m for m in s.messages if m.get("role") == "tool" and m.get("name") != "research"]
    return Outcome(
        rows=rows,
        finding=(
            f"The parent's transcript holds {len(s.messages)} messages — the child's "
            f"{len(child_turns)} turns of reading stay in the child's own window and the parent sees "
            "only the summary; a runaway child stops at its own cap; and one Stop ends child and "
            "parent together."
        ),
        ours=f"parent {len(s.messages)} messages / child {len(child_turns)} turns; runaway child stops "
        f"{wild_details.get('child_status')} at {wild_details.get('child_turns')}; Stop → both interrupted",
        chapter="child transcript stays out; child has its own limits; one Stop cancels the tree",
        notes=[
            "The child's trace lines share the sink with the parent's, under the child's own run id "
            f"(`{s.run_id}.c1`), so the tree is one query.",
            f"Stop reached both runs {tree['gap_ms']:.0f} ms after it was pressed (wall clock; varies).",
            "The parent's cost column counts the parent's own model calls; the child's calls are billed "
            "to the child's own budget and shown beside it.",
        ],
        checks={
            "the child's reads stay out of the parent": not leaked
            and len(s.messages) == 5
            and s.status == "completed",
            "the child ran its own turns": len(child_turns) == 3
            and details.get("child_status") == "completed",
            "a runaway child stops at its own cap": wild_details.get("child_status") == "max_turns_exceeded"
            and wild_details.get("child_turns") == 6
            and wild.status == "completed",
            "one Stop cancels the tree": tree["run"].state.status == "interrupted"
            and len(tree_stops) == 2
            and all(v["status"] == "interrupted" for v in tree_stops.values())
            and tree["gap_ms"] < 100,
        },
    )
