"""8. Approval: a write that needs a person stops the run and hands back control."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from experiments.chapter import figures
from experiments.lab.report import Prose, Table
from experiments.lab.runs import Decision, Env, Run, approve_it, copy_of, reject_with, run_scenario

NAME = "approval"
TITLE = "8 · Approval on `destructive`: stop, then approve or reject"
CH = figures.APPROVAL
REASON = "the user declined the deletion"


async def decide(env: Env, run_id: str, decision: Decision, *, auto_approve: bool = False) -> tuple[Run, Run]:
    """Run `destructive` until it stops for approval, apply `decision` to a copy of the state, and
    resume it on the same sandbox; returns (the stop, the end). `auto_approve` lets the delete
    through without a person (the gate broken): then there is no stop to decide on."""
    first = await run_scenario(env, "destructive", run_id=run_id, auto_approve=auto_approve)
    if first.state.status != "interrupted":
        return first, first
    resumed = copy_of(first.state)
    decision(resumed)
    second = await run_scenario(env, "destructive", run_id=run_id, state=resumed, sandbox=first.sandbox)
    return first, second


@dataclass(frozen=True, kw_only=True)
class Measured:
    stop: Run
    approved: Run
    rejected: Run


async def measure(env: Env, *, auto_approve: bool = False) -> Measured:
    (stop, approved), (_, rejected) = await asyncio.gather(
        decide(env, "approve", approve_it, auto_approve=auto_approve),
        decide(env, "reject", reject_with(REASON), auto_approve=auto_approve),
    )
    return Measured(stop=stop, approved=approved, rejected=rejected)


def _on_disk(r: Run) -> bool:
    return (r.sandbox / "access.log").exists()


def table(m: Measured) -> Table:
    stop = m.stop.state.interruption
    call = f"{stop.tool_name}({stop.args})" if getattr(stop, "type", "") == "approval" else ""
    rows = [
        (
            "stopped",
            m.stop,
            f"{m.stop.state.status}/{getattr(stop, 'type', '')}",
            call,
            f"stopped at turn {CH.stopped_at_turn}: interrupted / approval; deleted []",
        ),
        (
            "approve",
            m.approved,
            m.approved.state.status,
            "",
            f"turns={CH.approved_turns} deleted={json.dumps(list(CH.approved_deleted))} "
            f'"{CH.approved_answer}"',
        ),
        (
            "reject",
            m.rejected,
            m.rejected.state.status,
            "",
            f'turns={CH.rejected_turns} deleted=[] "{CH.rejected_answer}"',
        ),
    ]
    return Table(
        rows=[
            {
                "path": label,
                "turns": r.state.turns,
                "status": status,
                "call": c,
                "deleted": r.runs_of("delete_file"),
                "access.log on disk": _on_disk(r),
                "answer": r.state.answer or "",
                "chapter": ch,
            }
            for label, r, status, c, ch in rows
        ]
    )


def checks(m: Measured) -> dict[str, bool]:
    stop = m.stop.state.interruption
    return {
        "stops at turn 2 for delete_file, nothing deleted": m.stop.state.turns == CH.stopped_at_turn
        and getattr(stop, "type", "") == "approval"
        and getattr(stop, "tool_name", "") == "delete_file"
        and not m.stop.runs_of("delete_file"),
        "approve deletes access.log from disk and says so": m.approved.state.turns == CH.approved_turns
        and tuple(m.approved.runs_of("delete_file")) == CH.approved_deleted
        and not _on_disk(m.approved)
        and m.approved.state.answer == CH.approved_answer,
        "reject leaves access.log on disk and says so": m.rejected.state.turns == CH.rejected_turns
        and m.rejected.runs_of("delete_file") == []
        and _on_disk(m.rejected)
        and m.rejected.state.answer == CH.rejected_answer,
    }


def prose(m: Measured) -> Prose:
    left = sorted(p.name for p in m.approved.sandbox.iterdir())
    return Prose(
        finding=(
            f"The delete stops the run at turn {m.stop.state.turns} with nothing deleted; approved, it "
            f"finishes in {m.approved.state.turns} turns having deleted access.log; rejected with a "
            f"reason, it finishes in {m.rejected.state.turns} turns, deleting nothing and saying so."
        ),
        ours=f"stop @{m.stop.state.turns}; approve → {m.approved.state.turns} turns "
        f"{json.dumps(m.approved.runs_of('delete_file'))}; reject → {m.rejected.state.turns} turns "
        f"{json.dumps(m.rejected.runs_of('delete_file'))}",
        chapter=f"stop @{CH.stopped_at_turn}; approve → {CH.approved_turns} turns "
        f"{json.dumps(list(CH.approved_deleted))}; "
        f"reject → {CH.rejected_turns} turns []",
        notes=[f"Files left in the approved run's sandbox: {', '.join(left)}."],
    )
