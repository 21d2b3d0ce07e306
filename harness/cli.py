"""`python -m harness` / `harness`: run a scenario, then approve, reject, resume or show it.

Runs live in a state folder (`--state-dir`, else $HARNESS_STATE_DIR, else ./state): one JSON
file per run, its sandbox under `sandboxes/<id>/`, its trace under `traces/<id>.jsonl`. The
flags a run was started with are kept in the run (`meta`), so `resume` needs only the id.
Ctrl-C cancels the run through its signal: it is saved `interrupted/cancelled` and the command
that resumes it is printed. Exit status: 0 completed, 1 failed, 3 stopped but resumable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

from harness.approvals import approve, reject
from harness.catalog import default_tools, make_sandbox
from harness.client import ModelClient
from harness.loop import Dedupe, Progress, RunOptions, run
from harness.state import Approval, CancelledBy, RunState, new_run, pending, reason_of
from harness.store import FileStore
from harness.trace import JsonlTrace
from harness.usage import Limits

DEFAULT_TASK = "Which file mentions a timeout?"
EXIT = {"completed": 0, "failed": 1}


def summary_line(state: RunState, label: str) -> str:
    """The chapter's one-line account of a run."""
    return (
        f"{label:<14}  turns={state.turns}  tools={len(state.tool_runs)}  in={state.prompt_tokens}  "
        f"out={state.completion_tokens}  cost=${state.cost_usd:.6f}  ms={state.elapsed_ms:.0f}  "
        f"status={state.status}"
    )


def _label(state: RunState) -> str:
    cap = state.meta.get("max_turns")
    return f"{state.meta.get('scenario', '?')}, cap {cap if cap is not None else 'none'}"


def _report(state: RunState) -> list[str]:
    lines = [summary_line(state, _label(state))]
    stop, rid = state.interruption, state.run_id
    if state.status == "completed":
        lines.append(f'   answer: "{state.answer}"')
    elif state.status == "failed":
        lines.append(f"   error: {state.error}")
    elif isinstance(stop, Approval):
        doubt = " (IN DOUBT: an earlier process may already have done this)" if stop.in_doubt else ""
        call = f"{stop.tool_name}({json.dumps(stop.args)})"
        lines.append(f"   stopped: interrupted / approval -> {call}{doubt}")
        lines.append(f"   decide:  harness approve {rid} {stop.call_id}   |   "
                     f"harness reject {rid} {stop.call_id} --reason \"...\"")
    elif isinstance(stop, CancelledBy):
        lines.append(f"   interrupted / cancelled: {stop.reason}")
        lines.append(f"   resume:  harness resume {rid}")
    else:
        lines.append(f"   stopped: {state.status} ({reason_of(state)}); "
                     f"raise the limit and run: harness resume {rid} --max-turns N --budget USD")
    lines.append(f"   run id: {rid}")
    return lines


def _options(meta: dict[str, Any], state_dir: Path, run_id: str,
             checkpoint: Callable[[str], None] | None) -> tuple[RunOptions, list]:
    started = time.monotonic()

    def on_progress(p: Progress) -> None:
        ms = (time.monotonic() - started) * 1000
        print(f"   progress: {p.label}  (t+{ms:.0f} ms)", file=sys.stderr, flush=True)

    options = RunOptions(
        model=meta["scenario"],
        mock_options=meta.get("mock_options"),
        limits=Limits(max_turns=meta.get("max_turns"), max_budget_usd=meta.get("budget"),
                      hard_budget=bool(meta.get("hard_budget")),
                      budget_check=meta.get("budget_check", "before_call")),
        dedupe=meta.get("dedupe", "off"),
        errors=meta.get("errors", "descriptive"),
        stop_on_permanent=meta.get("stop_on_permanent", True),
        auto_approve=frozenset(meta.get("auto_approve", ())),
        on_progress=on_progress,
        trace=JsonlTrace(state_dir / "traces" / f"{run_id}.jsonl"),
        store=FileStore(state_dir, checkpoint=checkpoint),
        sandbox=state_dir / "sandboxes" / run_id,
        checkpoint=checkpoint,
    )
    tools = default_tools(scan_seconds=meta.get("scan_seconds", 3.0), research=meta["scenario"] == "research")
    return options, tools


async def _drive(state: RunState, state_dir: Path, base_url: str | None,
                 checkpoint: Callable[[str], None] | None) -> RunState:
    options, tools = _options(state.meta, state_dir, state.run_id, checkpoint)
    if not options.sandbox.is_dir():
        make_sandbox(options.sandbox)
    loop = asyncio.get_running_loop()

    def on_ctrl_c() -> None:
        options.cancel.set("user pressed Ctrl-C")
        print("   stopping and saving… (Ctrl-C again to quit without saving)", file=sys.stderr, flush=True)
        loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C raises KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, on_ctrl_c)
    except (ValueError, RuntimeError, NotImplementedError):
        pass  # not the main thread (or no signals here): Ctrl-C keeps its default meaning
    try:
        async with ModelClient(base_url) as client:
            return await run(state, tools=tools, options=options, client=client)
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _finish(state: RunState, state_dir: Path, args: argparse.Namespace, checkpoint) -> int:
    if not getattr(args, "no_resume", False):
        state = asyncio.run(_drive(state, state_dir, args.base_url, checkpoint))
    else:
        FileStore(state_dir).save(state)
    print("\n".join(_report(state)), flush=True)
    return EXIT.get(state.status, 3)


def _cmd_run(args: argparse.Namespace, state_dir: Path, checkpoint) -> int:
    meta = {
        "scenario": args.scenario, "max_turns": args.max_turns, "budget": args.budget,
        "hard_budget": args.hard_budget, "budget_check": args.budget_check, "dedupe": args.dedupe,
        "errors": args.errors, "stop_on_permanent": not args.feed_back_permanent,
        "auto_approve": sorted(args.auto_approve), "mock_options": args.mock_options,
        "scan_seconds": args.scan_seconds,
    }
    state = new_run(args.task, run_id=args.run_id, meta=meta)
    if FileStore(state_dir).path(state.run_id).exists():
        raise SystemExit(f"harness: run {state.run_id} already exists in {state_dir}")
    return _finish(state, state_dir, args, checkpoint)


def _cmd_decide(args: argparse.Namespace, state_dir: Path, checkpoint) -> int:
    state = FileStore(state_dir).load(args.run_id)
    try:
        if args.command == "approve":
            approve(state, args.call_id)
        else:
            reject(state, args.call_id, reason=args.reason, unsafe_empty=args.unsafe_empty)
    except ValueError as e:
        raise SystemExit(f"harness: {e}") from None
    return _finish(state, state_dir, args, checkpoint)


def _cmd_resume(args: argparse.Namespace, state_dir: Path, checkpoint) -> int:
    state = FileStore(state_dir).load(args.run_id)
    # "running" on disk means the process that ran it died (a crash, SIGKILL): resume it too.
    if not (state.resumable or state.status == "running"):
        raise SystemExit(f"harness: run {state.run_id} is {state.status}; nothing to resume")
    for key in ("max_turns", "budget"):
        if getattr(args, key) is not None:
            state.meta[key] = getattr(args, key)
    return _finish(state, state_dir, args, checkpoint)


def _cmd_show(args: argparse.Namespace, state_dir: Path, checkpoint) -> int:
    state = FileStore(state_dir).load(args.run_id)
    print("\n".join(_report(state)))
    for c in pending(state):
        print(f"   pending: {c['id']} {c['function']['name']}({c['function']['arguments']})")
    runs = ", ".join(r.label for r in state.tool_runs)
    print(f"   tool runs: {runs or 'none'}")
    print(f"   per-turn prompt tokens: {', '.join(str(u.prompt_tokens) for u in state.turn_usage) or 'none'}")
    if args.messages:
        for m in state.messages:
            print(json.dumps(m, ensure_ascii=False))
    return EXIT.get(state.status, 3)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    p.add_argument("--state-dir", type=Path, default=None,
                   help="where runs are saved (default: $HARNESS_STATE_DIR or ./state)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible /v1 URL (default: $LLM_BASE_URL)")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="start a run against a scenario (the model name)")
    r.add_argument("--scenario", default="plan")
    r.add_argument("--task", default=DEFAULT_TASK)
    r.add_argument("--run-id", default=None)
    r.add_argument("--max-turns", type=lambda v: None if v == "none" else int(v), default=20,
                   help="turn cap, or 'none' (default: 20)")
    r.add_argument("--budget", type=float, default=None, help="dollars (default: no budget)")
    r.add_argument("--hard-budget", action="store_true",
                   help="cap max_tokens so spend never exceeds the budget")
    r.add_argument("--budget-check", choices=["before_call", "after_call"], default="before_call")
    r.add_argument("--dedupe", nargs="?", const="read-only", default="off", choices=get_args(Dedupe))
    r.add_argument("--errors", choices=["fatal", "generic", "descriptive"], default="descriptive")
    r.add_argument("--feed-back-permanent", action="store_true",
                   help="feed permanent tool errors back to the model instead of failing the run")
    r.add_argument("--auto-approve", action="append", default=[], metavar="TOOL")
    r.add_argument("--mock-options", default=None, help="e.g. latency=250+fault=429@1x2")
    r.add_argument("--scan-seconds", type=float, default=3.0)

    for name in ("approve", "reject"):
        d = sub.add_parser(name, help=f"{name} the call a run stopped for, then continue it")
        d.add_argument("run_id")
        d.add_argument("call_id", nargs="?")
        d.add_argument("--no-resume", action="store_true", help="record the decision only")
        if name == "reject":
            d.add_argument("--reason", required=True)
            d.add_argument("--unsafe-empty", action="store_true", help="allow an empty reason")

    s = sub.add_parser("resume", help="continue a stopped run")
    s.add_argument("run_id")
    s.add_argument("--max-turns", type=int, default=None)
    s.add_argument("--budget", type=float, default=None)

    w = sub.add_parser("show", help="print a saved run")
    w.add_argument("run_id")
    w.add_argument("--messages", action="store_true")
    return p


COMMANDS = {"run": _cmd_run, "approve": _cmd_decide, "reject": _cmd_decide,
            "resume": _cmd_resume, "show": _cmd_show}


def main(argv: Sequence[str] | None = None, *, checkpoint: Callable[[str], None] | None = None) -> int:
    """CLI entry point; `checkpoint` is the loop's test hook (see harness.loop)."""
    args = _parser().parse_args(argv)
    state_dir = args.state_dir or Path(os.environ.get("HARNESS_STATE_DIR") or "state")
    try:
        return COMMANDS[args.command](args, state_dir, checkpoint)
    except (FileNotFoundError, ValueError) as e:
        print(f"harness: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `harness run … | head -1`: the reader left; the run is saved anyway
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
