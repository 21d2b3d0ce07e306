"""8. Approval: a write that needs a person stops the run and hands back control."""

from __future__ import annotations

import asyncio

from experiments.common import Env, Outcome, run_scenario
from harness import Limits, approve, reject
from harness.codec import from_json, to_json
from harness.state import Approval

NAME = "approval"
TITLE = "8 · Approval on `destructive`: stop, then approve or reject"


async def stopped(env: Env, run_id: str):
    """Run `destructive` until it stops for approval of the delete."""
    return await run_scenario(env, "destructive", run_id=run_id, limits=Limits(max_turns=20))


async def decide(env: Env, run_id: str, decision) -> tuple:
    """Stop for approval, apply `decision` to the state, resume; returns (the stop, the end)."""
    first = await stopped(env, run_id)
    # The loop mutates the state it is given; keep the stop as it was.
    resumed = from_json(to_json(first.state))
    decision(resumed)
    second = await run_scenario(
        env, "destructive", run_id=run_id, state=resumed, sandbox=first.sandbox, limits=Limits(max_turns=20)
    )
    return first, second


async def measure(env: Env) -> Outcome:
    (stop_a, approved), (stop_r, rejected) = await asyncio.gather(
        decide(env, "approve", approve),
        decide(env, "reject", lambda s: reject(s, reason="the user declined the deletion")),
    )
    stop = stop_a.state.interruption
    left = sorted(p.name for p in approved.sandbox.iterdir())
    rows = [
        {
            "path": "stopped",
            "turns": stop_a.state.turns,
            "status": f"{stop_a.state.status}/approval",
            "call": f"{stop.tool_name}({stop.args})" if isinstance(stop, Approval) else "",
            "deleted": stop_a.runs_of("delete_file"),
            "answer": "",
            "chapter": 'stopped at turn 2: interrupted / approval -> delete_file({"path":"access.log"}); []',
        },
        {
            "path": "approve",
            "turns": approved.state.turns,
            "status": approved.state.status,
            "call": "",
            "deleted": approved.runs_of("delete_file"),
            "answer": approved.state.answer,
            "chapter": 'turns=3 deleted=["access.log"] "Deleted access.log to free space."',
        },
        {
            "path": "reject",
            "turns": rejected.state.turns,
            "status": rejected.state.status,
            "call": "",
            "deleted": rejected.runs_of("delete_file"),
            "answer": rejected.state.answer,
            "chapter": 'turns=3 deleted=[] "I did not delete anything: you declined the deletion."',
        },
    ]
    return Outcome(
        rows=rows,
        finding=(
            f"The delete stops the run at turn {stop_a.state.turns} with nothing deleted; approved, it "
            f"finishes in {approved.state.turns} turns having deleted access.log; rejected with a "
            f"reason, it finishes in {rejected.state.turns} turns, deleting nothing and saying so."
        ),
        ours=f"stop @{stop_a.state.turns}; approve → {approved.state.turns} turns "
        f"{approved.runs_of('delete_file')}; reject → {rejected.state.turns} turns "
        f"{rejected.runs_of('delete_file')}",
        chapter='stop @2; approve → 3 turns ["access.log"]; reject → 3 turns []',
        notes=[f"Files left in the approved run's sandbox: {', '.join(left)}."],
        checks={
            "stops at turn 2 for delete_file, nothing deleted": stop_a.state.turns == 2
            and isinstance(stop, Approval)
            and stop.tool_name == "delete_file"
            and not stop_a.runs_of("delete_file"),
            "approve deletes access.log and says so": approved.state.turns == 3
            and approved.runs_of("delete_file") == ["access.log"]
            and "access.log" not in left
            and approved.state.answer == "Deleted access.log to free space.",
            "reject deletes nothing and says so": rejected.state.turns == 3
            and rejected.runs_of("delete_file") == []
            and rejected.state.answer == "I did not delete anything: you declined the deletion.",
        },
    )
