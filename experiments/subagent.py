"""14. A sub-agent behind one tool: its own transcript, its own limits, the parent's signal."""

from __future__ import annotations

import asyncio
import time

from experiments.common import Env, Outcome, options, run_scenario, usd
from harness import Cancel, Limits, MemoryTrace
from harness.chapter import ListFiles, ReadFile, Research

NAME = "subagent"
TITLE = "14 · Sub-agent: `research` — own transcript, own limits, one Stop cancels the tree"


def _tools(env: Env, run_id: str, child: str, **research: object):
    """Tools of a parent whose `research` child talks to scenario `child`, over its own sandbox."""
    sandbox = env.workdir / run_id

    def build(model) -> list:
        files = [ListFiles(sandbox), ReadFile(sandbox)]
        return [*files, Research(model=model.with_name(child), tools=files, **research)]

    return build


class _StopDuringChildTurn(MemoryTrace):
    """A trace that presses Stop shortly after the child's first tool result: by then the child
    is waiting on its second (slow) model turn, whatever else the machine is doing."""

    def __init__(self, cancel: Cancel) -> None:
        super().__init__()
        self.cancel = cancel
        self.pressed: float | None = None

    def emit(self, event: dict) -> None:
        super().emit(event)
        if event["type"] == "tool_result" and "." in event["runId"] and self.pressed is None:
            self.pressed = 0.0
            asyncio.get_running_loop().call_later(0.05, self.press)

    def press(self) -> None:
        self.pressed = time.perf_counter()
        self.cancel.set("user pressed Stop")


async def _stopped_tree(env: Env) -> dict:
    """Stop the parent while its child waits on a slow provider turn."""
    cancel = Cancel()
    trace = _StopDuringChildTurn(cancel)
    opts = options(env, "research", "tree", limits=Limits(max_turns=5), cancel=cancel, trace=trace)
    tools = _tools(env, "tree", "plan+latency=400")
    r = await run_scenario(env, "research", run_id="tree", opts=opts, tools=tools)
    stops = {e["runId"]: e for e in r.trace.events if e["type"] == "run_stopped"}
    return {"run": r, "stops": stops, "gap_ms": (time.perf_counter() - (trace.pressed or 0.0)) * 1000}


async def measure(env: Env) -> Outcome:
    normal, runaway_child, tree = await asyncio.gather(
        run_scenario(
            env, "research", run_id="parent", limits=Limits(max_turns=5), tools=_tools(env, "parent", "plan")
        ),
        run_scenario(
            env,
            "research",
            run_id="parent-runaway-child",
            limits=Limits(max_turns=5),
            tools=_tools(env, "parent-runaway-child", "runaway", max_turns=6),
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

    def row(label: str, r, child_status: str) -> dict:
        d = r.state.tool_runs[0].details if r.state.tool_runs else {}
        return {
            "run": label,
            "parent_turns": r.state.turns,
            "parent_messages": len(r.state.messages),
            "cost_incl_child": usd(r.state.cost_usd),
            "child_turns": d.get("child_turns", ""),
            "child_cost": usd(r.state.tool_cost_usd),
            "child_status": child_status,
            "parent_status": r.state.status,
            "answer": r.state.answer or "",
        }

    child_stops = "/".join(str(v["status"]) for k, v in tree_stops.items() if k != "tree")
    rows = [
        row("research (child runs `plan`)", normal, details.get("child_status")),
        row("child is a runaway (cap 6)", runaway_child, wild_details.get("child_status")),
        row("Stop while the child waits on its 2nd turn", tree["run"], child_stops),
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
        f"{wild_details.get('child_status')} at {wild_details.get('child_turns')}; "
        f"Stop → parent {tree['run'].state.status}, child {child_stops}",
        chapter="child transcript stays out; child has its own limits; one Stop cancels the tree",
        notes=[
            "The child's trace lines share the sink with the parent's, under the child's own run id "
            f"(`{s.run_id}.c1`), so the tree is one query.",
            f"Stop reached both runs {tree['gap_ms']:.0f} ms after it was pressed (wall clock; varies).",
            "The child's model calls are the parent's money too: `cost_incl_child` adds them to the "
            "parent's own, and they count against the parent's budget; `child_cost` is that part.",
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
