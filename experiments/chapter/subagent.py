"""14. A sub-agent behind one tool: its own transcript, its own limits, the parent's signal.

The table carries no wall-clock figure, so a rerun leaves it unchanged.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from experiments.chapter import figures
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Child, Env, Run, TraceThen, new_cancel, run_scenario, turn_costs

NAME = "subagent"
TITLE = "14 · Sub-agent: `research` — own transcript, own limits, one Stop cancels the tree"
CHILD_CAP = figures.SUB_AGENT.max_turns
"""The research tool's own turn cap (the chapter's `maxTurns: 6`)."""
PARENT_BUDGET_USD = 0.004
"""A hard budget smaller than what a runaway child would spend on its own."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    normal: Run
    """The child runs `plan`."""
    runaway_child: Run
    """The child never answers; only its own cap stops it."""
    tree: Run
    """Stop pressed while the child waits on its second (slow) turn."""
    budgeted: Run
    """A hard parent budget over a runaway child: the child spends from what the parent has left."""
    stop_gap_ms: float
    """Wall time from Stop to the tree's end: for `make bench`, never in the table."""

    def child(self, r: Run) -> dict:
        return r.state.tool_runs[0].details if r.state.tool_runs else {}

    def stops(self, r: Run) -> dict[str, dict]:
        return {e["runId"]: e for e in r.trace.events if e["type"] == "run_stopped"}


async def _stopped_tree(env: Env) -> tuple[Run, float]:
    """Press Stop 50 ms after the child's first tool result: by then the child is waiting on its
    second (slow) model turn, whatever else the machine is doing. Returns the run and the ms from
    Stop to its end."""
    cancel = new_cancel()
    pressed: list[float] = []

    def press() -> None:
        pressed.append(time.perf_counter())
        cancel.set("user pressed Stop")

    def then(event: dict) -> None:
        if event["type"] == "tool_result" and "." in event["runId"] and not pressed:
            pressed.append(0.0)
            asyncio.get_running_loop().call_later(0.05, press)

    r = await run_scenario(
        env,
        "research",
        run_id="tree",
        max_turns=5,
        cancel=cancel,
        trace=TraceThen(then),
        child=Child(model="plan", latency_ms=400),
    )
    return r, (time.perf_counter() - pressed[-1]) * 1000 if pressed else float("nan")


async def measure(env: Env, *, runaway_child_cap: int = CHILD_CAP, charge_child: bool = True) -> Measured:
    """`runaway_child_cap` is the runaway child's own cap (a large one takes its cap away: broken);
    `charge_child=False` drops the budgeted child's spending instead of charging the parent (broken)."""
    normal, runaway_child, (tree, gap), budgeted = await asyncio.gather(
        run_scenario(env, "research", run_id="parent", max_turns=5, child=Child()),
        run_scenario(
            env,
            "research",
            run_id="parent-runaway-child",
            max_turns=5,
            child=Child(model="runaway", max_turns=runaway_child_cap),
        ),
        _stopped_tree(env),
        run_scenario(
            env,
            "research",
            run_id="parent-budget",
            max_turns=5,
            budget_usd=PARENT_BUDGET_USD,
            hard_budget=True,
            child=Child(model="runaway", max_turns=runaway_child_cap, charged=charge_child),
        ),
    )
    return Measured(normal=normal, runaway_child=runaway_child, tree=tree, budgeted=budgeted, stop_gap_ms=gap)


def table(m: Measured) -> Table:
    def row(label: str, r: Run, child_status: str) -> dict:
        d = m.child(r)
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

    tree_child = "/".join(str(v["status"]) for k, v in m.stops(m.tree).items() if k != "tree")
    return Table(
        rows=[
            row("research (child runs `plan`)", m.normal, m.child(m.normal).get("child_status", "")),
            row(
                f"child is a runaway (cap {CHILD_CAP})",
                m.runaway_child,
                m.child(m.runaway_child).get("child_status", ""),
            ),
            row("Stop while the child waits on its 2nd turn", m.tree, tree_child),
            row(
                f"hard parent budget {usd(PARENT_BUDGET_USD)}, runaway child",
                m.budgeted,
                m.child(m.budgeted).get("child_status", ""),
            ),
        ]
    )


def checks(m: Measured) -> dict[str, bool]:
    s = m.normal.state
    child_turns = [e for e in m.normal.trace.events if e["type"] == "turn" and e["runId"] != s.run_id]
    leaked = [x for x in s.messages if x.get("role") == "tool" and x.get("name") != "research"]
    wild, tree_stops = m.child(m.runaway_child), m.stops(m.tree)
    return {
        "the child's reads stay out of the parent": not leaked
        and len(s.messages) == 5
        and s.status == "completed",
        "the child ran its own turns": len(child_turns) == 3
        and m.child(m.normal).get("child_status") == "completed",
        f"a runaway child stops at its own cap of {CHILD_CAP}": wild.get("child_status")
        == "max_turns_exceeded"
        and wild.get("child_turns") == CHILD_CAP,
        "one Stop cancels the tree": m.tree.state.status == "interrupted"
        and len(tree_stops) == 2
        and all(v["status"] == "interrupted" for v in tree_stops.values()),
        "a hard parent budget holds with the child's spending": _charged(m.budgeted)
        and m.budgeted.state.cost_usd <= PARENT_BUDGET_USD,
    }


def _charged(r: Run) -> bool:
    """The child spent, and the parent's bill is its own turns plus exactly that spending."""
    s = r.state
    child = sum(t.details.get("child_cost_usd", 0.0) for t in s.tool_runs)
    return (
        s.tool_cost_usd > 0
        and abs(s.tool_cost_usd - child) < 1e-12
        and abs(s.cost_usd - (sum(turn_costs(s)) + child)) < 1e-12
    )


def prose(m: Measured) -> Prose:
    s, wild = m.normal.state, m.child(m.runaway_child)
    child_turns = m.child(m.normal).get("child_turns", 0)
    tree_child = "/".join(str(v["status"]) for k, v in m.stops(m.tree).items() if k != "tree")
    return Prose(
        finding=(
            f"The parent's transcript holds {len(s.messages)} messages — the child's {child_turns} turns of "
            "reading stay in the child's own window and the parent sees only the summary; a runaway child "
            "stops at its own cap; and one Stop ends child and parent together."
        ),
        ours=f"parent {len(s.messages)} messages / child {child_turns} turns; runaway child stops "
        f"{wild.get('child_status')} at {wild.get('child_turns')}; Stop → parent {m.tree.state.status}, "
        f"child {tree_child}",
        chapter="child transcript stays out; child has its own limits; one Stop cancels the tree",
        notes=[
            "The child's trace lines share the sink with the parent's, under the child's own run id "
            f"(`{s.run_id}.c1`), so the tree is one query.",
            "The child's model calls are the parent's money too: `cost_incl_child` adds them to the "
            "parent's own, and they count against the parent's budget; `child_cost` is that part. With a "
            f"hard parent budget of {usd(PARENT_BUDGET_USD)} the runaway child spent "
            f"{usd(m.budgeted.state.tool_cost_usd)} and the tree {usd(m.budgeted.state.cost_usd)}.",
            "How fast Stop reaches the tree is wall-clock; `make bench` records it.",
        ],
    )
