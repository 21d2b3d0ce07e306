"""10. Kill and resume: a run SIGKILLed mid-task finishes in a new process at the same cost."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from experiments.chapter import figures
from experiments.lab.paths import ROOT
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import (
    Env,
    Run,
    forget_cost,
    forget_intents,
    load_saved,
    run_scenario,
    saved_trace,
    turn_costs,
)
from harness import RunState

NAME = "kill_resume"
TITLE = "10 · Kill and resume: SIGKILL after turn 2 and its tool, resume in a new process"
CH = figures.KILL_RESUME


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


def _cli(d: Path, scenario: str, run_id: str, *extra: str) -> list[str]:
    return [
        "--state-dir",
        str(d),
        "run",
        "--scenario",
        scenario,
        "--run-id",
        run_id,
        "--max-turns",
        "20",
        *extra,
    ]


def _fresh(d: Path) -> Path:
    """An empty state directory: a rerun in the same workdir starts over (the CLI refuses to run
    an id it already saved, and the trace appends, so old lines would count twice)."""
    shutil.rmtree(d, ignore_errors=True)
    return d


@dataclass(frozen=True, kw_only=True)
class Killed:
    killed_rc: int
    restored: RunState
    resumed_rc: int
    final: RunState


@dataclass(frozen=True, kw_only=True)
class Write:
    """`destructive`, delete auto-approved, killed after the delete ran but before its result was saved."""

    intents: bool
    killed_rc: int
    final: RunState
    delete_executions: int
    """Counted from the run's JSONL trace, which both processes append to."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    reference: Run
    plan: Killed
    wal: Write
    naive: Write


async def _plan(env: Env, *, saved_cost: bool) -> Killed:
    d = _fresh(env.workdir / "kill-resume-plan")
    killed = await _process(
        env, "-m", "experiments.reliability.crash", "after_tool_result,after_tool_result", "--",
        *_cli(d, "plan", "kr"),
    )
    if not saved_cost:
        forget_cost(d, "kr")
    restored = load_saved(d, "kr")
    resumed = await _process(env, "-m", "harness", "--state-dir", str(d), "resume", "kr")
    return Killed(killed_rc=killed, restored=restored, resumed_rc=resumed, final=load_saved(d, "kr"))


async def _write(env: Env, *, intents: bool, tag: str) -> Write:
    d = _fresh(env.workdir / f"kill-resume-write-{tag}")
    killed = await _process(
        env,
        "-m",
        "experiments.reliability.crash",
        "after_intent,before_save",
        "--",
        *_cli(d, "destructive", "kw", "--auto-approve", "delete_file"),
    )
    if not intents:
        forget_intents(d, "kw")
    await _process(env, "-m", "harness", "--state-dir", str(d), "resume", "kw")
    started = [
        e for e in saved_trace(d, "kw") if e["type"] == "tool_start" and e["toolName"] == "delete_file"
    ]
    return Write(intents=intents, killed_rc=killed, final=load_saved(d, "kw"), delete_executions=len(started))


async def measure(env: Env, *, intents: bool = True, saved_cost: bool = True) -> Measured:
    """`intents=False` resumes the write-ahead run without its intent record (broken);
    `saved_cost=False` resumes the killed plan from a state whose spend was not saved (broken)."""
    reference, plan, wal, naive = await asyncio.gather(
        run_scenario(env, "plan", run_id="kr-reference"),
        _plan(env, saved_cost=saved_cost),
        _write(env, intents=intents, tag="wal"),
        _write(env, intents=False, tag="naive"),
    )
    return Measured(reference=reference, plan=plan, wal=wal, naive=naive)


def _label(w: Write) -> str:
    return "write-ahead intent (ours)" if w.intents else "naive resume (no intent record)"


def _status(w: Write) -> str:
    stop = w.final.interruption
    return f"{w.final.status}/approval, in doubt" if getattr(stop, "in_doubt", False) else w.final.status


def table(m: Measured) -> Table:
    restored, final, ref = m.plan.restored, m.plan.final, m.reference.state
    two_turns = sum(turn_costs(ref)[:2])
    rows = [
        {
            "step": "process 1 killed (SIGKILL) after turn 2",
            "exit": m.plan.killed_rc,
            "turns": restored.turns,
            "cost": usd(restored.cost_usd),
            "messages": len(restored.messages),
            "status": restored.status,
            "predicted for ours": f"{usd(two_turns)} (the reference's first two turns)",
            "chapter": f"restored: turns={CH.restored_turns} cost={usd(CH.restored_cost_usd)} "
            f"messages={CH.restored_messages} status=running",
        },
        {
            "step": "process 2: resumed",
            "exit": m.plan.resumed_rc,
            "turns": final.turns,
            "cost": usd(final.cost_usd),
            "messages": len(final.messages),
            "status": final.status,
            "predicted for ours": usd(ref.cost_usd),
            "chapter": f"resumed: turns={CH.resumed_turns} cost={usd(CH.resumed_cost_usd)} completed",
        },
        {
            "step": "uninterrupted reference run",
            "exit": "",
            "turns": ref.turns,
            "cost": usd(ref.cost_usd),
            "messages": len(ref.messages),
            "status": ref.status,
            "predicted for ours": "",
            "chapter": usd(CH.resumed_cost_usd),
        },
    ]
    writes = [
        {
            "step": f"write: {_label(w)}",
            "exit": w.killed_rc,
            "status": _status(w),
            "chapter": f"delete_file executions={w.delete_executions}",
        }
        for w in (m.wal, m.naive)
    ]
    return Table(rows=rows + writes, shown=rows)


def checks(m: Measured) -> dict[str, bool]:
    restored, final, ref = m.plan.restored, m.plan.final, m.reference.state
    return {
        "the killed processes died by SIGKILL": m.plan.killed_rc
        == m.wal.killed_rc
        == m.naive.killed_rc
        == -9,
        "restored after turn 2 with 6 messages, at the reference's first two turns' cost": (
            restored.turns,
            len(restored.messages),
        )
        == (CH.restored_turns, CH.restored_messages)
        and abs(restored.cost_usd - sum(turn_costs(ref)[:2])) < 1e-12,
        "resumed run completes at the uninterrupted cost": final.status == "completed"
        and final.turns == ref.turns
        and abs(final.cost_usd - ref.cost_usd) < 1e-12,
        "no tool ran twice": tuple(r.label for r in final.tool_runs) == CH.tool_runs,
        "write-ahead resume asks instead of writing twice": m.wal.delete_executions == 1
        and getattr(m.wal.final.interruption, "in_doubt", False),
        "naive resume writes twice": m.naive.delete_executions == 2,
    }


def prose(m: Measured) -> Prose:
    restored, final, ref = m.plan.restored, m.plan.final, m.reference.state
    runs = ", ".join(r.label for r in final.tool_runs)
    writes = "\n".join(
        f"- {_label(w)}: {w.delete_executions} execution(s) of delete_file, then {_status(w)}"
        for w in (m.wal, m.naive)
    )
    return Prose(
        finding=(
            f"Killed with SIGKILL after turn 2 and resumed in a new process, the run finishes in "
            f"{final.turns} turns at {usd(final.cost_usd)} — exactly the uninterrupted run's "
            f"{usd(ref.cost_usd)} — with tool runs {runs} across both processes; a run killed mid-write "
            "resumes to an in-doubt approval instead of deleting twice."
        ),
        ours=f"restored turns={restored.turns} cost={usd(restored.cost_usd)} "
        f"messages={len(restored.messages)}; "
        f"resumed turns={final.turns} cost={usd(final.cost_usd)} {final.status}",
        chapter=f"restored turns={CH.restored_turns} cost={usd(CH.restored_cost_usd)} "
        f"messages={CH.restored_messages}; resumed turns={CH.resumed_turns} "
        f"cost={usd(CH.resumed_cost_usd)} completed",
        explained="both costs are `plan`'s (its first two turns, then all three): the difference is plan's",
        notes=[
            f"Tool runs across both processes: {runs} (chapter: {', '.join(CH.tool_runs)}).",
            "Beyond the chapter — a process killed after `delete_file` ran but before its result was "
            f"saved (the checkpoint between them, not a sleep), then resumed:\n\n{writes}\n\n"
            "The executions are counted from the run's JSONL trace, which both processes append to.",
        ],
    )
