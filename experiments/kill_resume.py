"""10. Kill and resume: a run SIGKILLed mid-task finishes in a new process at the same cost."""

from __future__ import annotations

import asyncio
import os
import sys

from experiments.common import ROOT, Env, Outcome, run_scenario, usd
from harness import FileStore, Limits
from harness.state import Approval
from harness.trace import read_jsonl

NAME = "kill_resume"
TITLE = "10 · Kill and resume: SIGKILL after turn 2 and its tool, resume in a new process"


async def _process(env: Env, *args: str) -> int:
    """Run a real Python process against the mock; its exit code (-9 when it killed itself)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        cwd=ROOT,
        env={**os.environ, "LLM_BASE_URL": env.base_url},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode not in (0, -9, 3):
        raise RuntimeError(f"{args} exited {proc.returncode}: {err.decode()[-800:]}")
    return proc.returncode


async def _plan(env: Env) -> dict:
    d = env.workdir / "kill-resume-plan"
    killed = await _process(
        env,
        "-m",
        "experiments.crash",
        "after_tool_result,after_tool_result",
        "--",
        "--state-dir",
        str(d),
        "run",
        "--scenario",
        "plan",
        "--run-id",
        "kr",
        "--max-turns",
        "20",
    )
    restored = FileStore(d).load("kr")
    resumed_rc = await _process(env, "-m", "harness", "--state-dir", str(d), "resume", "kr")
    final = FileStore(d).load("kr")
    return {"killed": killed, "restored": restored, "final": final, "resumed_rc": resumed_rc}


async def _write(env: Env, naive: bool) -> dict:
    """`destructive`, delete auto-approved, killed after the delete ran but before its result was saved."""
    d = env.workdir / f"kill-resume-write-{'naive' if naive else 'wal'}"
    killed = await _process(
        env,
        "-m",
        "experiments.crash",
        "after_intent,before_save",
        "--",
        "--state-dir",
        str(d),
        "run",
        "--scenario",
        "destructive",
        "--run-id",
        "kw",
        "--max-turns",
        "20",
        "--auto-approve",
        "delete_file",
    )
    store = FileStore(d)
    if naive:
        # What a harness without write-ahead intents sees: a pending call, nothing to say it started.
        state = store.load("kw")
        state.intents.clear()
        store.save(state)
    await _process(env, "-m", "harness", "--state-dir", str(d), "resume", "kw")
    final = store.load("kw")
    started = [
        e
        for e in read_jsonl(d / "traces" / "kw.jsonl")
        if e["type"] == "tool_start" and e["toolName"] == "delete_file"
    ]
    return {"killed": killed, "final": final, "delete_executions": len(started)}


async def measure(env: Env) -> Outcome:
    reference, plan, wal, naive = await asyncio.gather(
        run_scenario(env, "plan", run_id="kr-reference", limits=Limits(max_turns=20)),
        _plan(env),
        _write(env, naive=False),
        _write(env, naive=True),
    )
    restored, final = plan["restored"], plan["final"]
    runs = [r.label for r in final.tool_runs]
    ref = reference.state
    stop = wal["final"].interruption
    rows = [
        {
            "step": "process 1 killed (SIGKILL) after turn 2",
            "exit": plan["killed"],
            "turns": restored.turns,
            "cost": usd(restored.cost_usd),
            "messages": len(restored.messages),
            "status": restored.status,
            "chapter": "restored: turns=2 cost=$0.001570 messages=6 status=running",
        },
        {
            "step": "process 2: resumed",
            "exit": plan["resumed_rc"],
            "turns": final.turns,
            "cost": usd(final.cost_usd),
            "messages": len(final.messages),
            "status": final.status,
            "chapter": "resumed: turns=3 cost=$0.002470 completed",
        },
        {
            "step": "uninterrupted reference run",
            "exit": "",
            "turns": ref.turns,
            "cost": usd(ref.cost_usd),
            "messages": len(ref.messages),
            "status": ref.status,
            "chapter": "$0.002470",
        },
    ]
    writes = [
        {
            "resume after dying mid-write": "write-ahead intent (ours)",
            "delete_file executions": wal["delete_executions"],
            "status after resume": f"{wal['final'].status}/"
            f"{'approval, in doubt' if isinstance(stop, Approval) and stop.in_doubt else stop}",
        },
        {
            "resume after dying mid-write": "naive resume (no intent record)",
            "delete_file executions": naive["delete_executions"],
            "status after resume": naive["final"].status,
        },
    ]
    return Outcome(
        rows=rows
        + [
            {
                "step": f"write: {w['resume after dying mid-write']}",
                "exit": "",
                "turns": "",
                "cost": "",
                "messages": "",
                "status": w["status after resume"],
                "chapter": f"delete_file executions={w['delete_file executions']}",
            }
            for w in writes
        ],
        table=rows,
        finding=(
            f"Killed with SIGKILL after turn 2 and resumed in a new process, the run finishes in "
            f"{final.turns} turns at {usd(final.cost_usd)} — exactly the uninterrupted run's "
            f"{usd(ref.cost_usd)} — with tool runs {', '.join(runs)} across both processes; a run "
            f"killed mid-write resumes to an in-doubt approval instead of deleting twice."
        ),
        ours=(
            f"restored turns={restored.turns} cost={usd(restored.cost_usd)} "
            f"messages={len(restored.messages)}; "
            f"resumed turns={final.turns} cost={usd(final.cost_usd)} {final.status}"
        ),
        chapter="restored turns=2 cost=$0.001570 messages=6; resumed turns=3 cost=$0.002470 completed",
        notes=[
            f"Tool runs across both processes: {', '.join(runs)} "
            "(chapter: list_files, read_file:errors.log).",
            "Beyond the chapter — a process killed after `delete_file` ran but before its result "
            "was saved (the checkpoint between them, not a sleep), then resumed:\n\n"
            + "\n".join(
                f"- {w['resume after dying mid-write']}: {w['delete_file executions']} "
                f"execution(s) of delete_file, then {w['status after resume']}"
                for w in writes
            )
            + "\n\nThe executions are counted from the run's JSONL trace, which both processes append to.",
        ],
        checks={
            "the killed process died by SIGKILL": plan["killed"] == -9
            and wal["killed"] == naive["killed"] == -9,
            "restored after turn 2 with 6 messages": (restored.turns, len(restored.messages)) == (2, 6),
            "resumed run completes at the uninterrupted cost": final.status == "completed"
            and final.turns == ref.turns
            and abs(final.cost_usd - ref.cost_usd) < 1e-12,
            "no tool ran twice": runs == ["list_files", "read_file:errors.log"],
            "write-ahead resume asks instead of writing twice": wal["delete_executions"] == 1
            and isinstance(stop, Approval)
            and stop.in_doubt,
            "naive resume writes twice": naive["delete_executions"] == 2,
        },
    )
