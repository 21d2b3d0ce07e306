"""`python -m harness` / `harness`: run a scenario, then approve, reject, resume or show it.

Runs live in a state folder (`--state-dir`, else $HARNESS_STATE_DIR, else ./state): one run's
snapshot and journal per id, its sandbox under `sandboxes/<id>/`, its trace under
`traces/<id>.jsonl`. The settings a run was started with (`Settings`) are kept in the run, so
`resume` needs only the id. Ctrl-C cancels the run through its signal: it is saved
`interrupted/cancelled` and the command that resumes it is printed. Exit status: 0 completed,
1 failed, 2 a usage error or a bad file, 3 stopped but resumable, 4 refused: another live
process owns the run, or the call already had a decision (this one lost and changed nothing).

One writer per run: `run`, `resume`, `approve` and `reject` claim the run (an OS lock on
`<id>.lock`, see `harness.store`) before they load it and hold it to the end; a run whose
owner died is free again and recovered as usual. Everything a provider or a file controls is
printed with control characters escaped (`\x1b`), so a hostile id cannot redraw the screen.

This is where the chapter's demo is wired to the core: the scenario is the model name, the
tools are the chapter's catalog over the run's sandbox, and the mock's options travel as a
header.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from harness.approvals import DecisionLost, approve, reject
from harness.cancel import Cancel
from harness.chapter import SYSTEM, Knobs, chapter_tools, every_tool, make_sandbox
from harness.client import ModelClient, OpenAIChat
from harness.codec import StateFileError, decode, to_dict
from harness.loop import Policy, Progress, run
from harness.state import Approval, CancelledBy, RunState, new_run, pending, reason_of
from harness.store import FileStore, RunOwned
from harness.trace import JsonlTrace
from harness.usage import BudgetCheck, Limits

DEFAULT_TASK = "Which file mentions a timeout?"
EXIT = {"completed": 0, "failed": 1}
REFUSED = 4
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def safe(text: object) -> str:
    """`text` with every control character visibly escaped (`\x1b`, `\n`): a provider's or a
    file's string cannot move the cursor, recolour, or redraw what the person is reading."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


Dedupe = Literal["off", "read-only", "all"]
ErrorWording = Literal["fatal", "generic", "descriptive"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything `harness run` was told; saved in the run (`meta["settings"]`)."""

    scenario: str = "plan"
    max_turns: int | None = 20
    budget: float | None = None
    hard_budget: bool = False
    budget_check: BudgetCheck = "before_call"
    dedupe: Dedupe = "off"
    """`all` is the chapter's naive cache (every tool deduped, writes included)."""
    errors: ErrorWording = "descriptive"
    feed_back_permanent: bool = False
    auto_approve: tuple[str, ...] = ()
    mock_options: str | None = None
    scan_seconds: float = 3.0

    def limits(self) -> Limits:
        return Limits(max_turns=self.max_turns, max_budget_usd=self.budget, hard_budget=self.hard_budget,
                      budget_check=self.budget_check)

    def policy(self) -> Policy:
        dedupe = every_tool if self.dedupe == "all" else self.dedupe == "read-only"
        return Policy(errors=self.errors, dedupe=dedupe, auto_approve=frozenset(self.auto_approve))

    def knobs(self) -> Knobs:
        return Knobs(feed_back_permanent=self.feed_back_permanent)


class NotACliRun(ValueError):
    """A run saved through the Python API: the CLI does not know its model and tools."""


def _cli_run(state: RunState) -> bool:
    return "settings" in state.meta or "scenario" in state.meta


def settings_of(state: RunState) -> Settings:
    if not _cli_run(state):
        raise NotACliRun(
            f"run {state.run_id} was started from Python, not by this CLI, which does not know its "
            "model and tools: continue it with harness.approve/reject and harness.run in Python"
        )
    raw, meta = state.meta.get("settings"), state.meta
    if raw is None and "scenario" in meta:  # a run saved by the schema-1 CLI kept flat keys
        names = {f.name for f in dataclasses.fields(Settings)}
        raw = {k: v for k, v in meta.items() if k in names}
        raw["feed_back_permanent"] = meta.get("stop_on_permanent") is False
    try:
        return decode(Settings, raw, "meta.settings")
    except Exception as e:  # noqa: BLE001 - any decoding problem is a damaged file
        raise StateFileError(f"run {state.run_id} has no usable CLI settings ({e})") from None


def summary_line(state: RunState, label: str) -> str:
    """The chapter's one-line account of a run."""
    return (
        f"{label:<14}  turns={state.turns}  tools={len(state.tool_runs)}  in={state.prompt_tokens}  "
        f"out={state.completion_tokens}  cost=${state.cost_usd:.6f}  ms={state.elapsed_ms:.0f}  "
        f"status={state.status}"
    )


def _label(state: RunState) -> str:
    if not _cli_run(state):
        return "(not a CLI run)"  # saved through the Python API into the same folder
    s = settings_of(state)
    return f"{s.scenario}, cap {s.max_turns if s.max_turns is not None else 'none'}"


def _report(state: RunState) -> list[str]:
    lines = [safe(summary_line(state, _label(state)))]
    stop, rid = state.stop, state.run_id
    if state.status == "completed":
        lines.append(f'   answer: "{safe(state.answer)}"')
    elif state.status == "failed":
        lines.append(f"   error: {safe(state.error)}")
    elif isinstance(stop, Approval):
        doubt = " (IN DOUBT: an earlier process may already have done this)" if stop.in_doubt else ""
        call = safe(f"{stop.tool_name}({json.dumps(stop.args)})")
        lines.append(f"   stopped: interrupted / approval -> {call}{doubt}")
        cid = _quoted(stop.call_id)
        lines.append(_next_step(state, f"decide:  harness approve {rid} {cid}   |   "
                                       f"harness reject {rid} {cid} --reason \"...\""))
    elif isinstance(stop, CancelledBy):
        lines.append(f"   interrupted / cancelled: {safe(stop.reason)}")
        lines.append(_next_step(state, f"resume:  harness resume {rid}"))
    else:
        lines.append(f"   stopped: {state.status} ({safe(reason_of(state))})")
        limit = f"raise the limit and run: harness resume {rid} --max-turns N --budget USD"
        lines.append(_next_step(state, limit))
    lines.append(f"   run id: {rid}")
    return lines


def _next_step(state: RunState, command: str) -> str:
    if _cli_run(state):
        return f"   {command}"
    return ("   continue it from Python (harness.approve / reject, then harness.run): "
            "the CLI does not know its tools")


def _quoted(call_id: str) -> str:
    """A call id as a shell word: plain when it is one, else escaped and quoted (never raw)."""
    return call_id if re.fullmatch(r"[A-Za-z0-9._:-]+", call_id) else repr(safe(call_id))


async def _drive(state: RunState, store: FileStore, base_url: str | None,
                 checkpoint: Callable[[str], None] | None) -> RunState:
    s = settings_of(state)
    sandbox = store.directory / "sandboxes" / state.run_id
    if sandbox.parent.is_symlink():
        raise ValueError(f"{sandbox.parent} is a symlink; the harness writes only into real folders")
    if not sandbox.is_dir() or sandbox.is_symlink():
        make_sandbox(sandbox)  # refuses a symlink
    started = time.monotonic()

    def on_progress(p: Progress) -> None:
        ms = (time.monotonic() - started) * 1000
        print(f"   progress: {safe(p.label)}  (t+{ms:.0f} ms)", file=sys.stderr, flush=True)

    cancel = _ctrl_c_cancels()
    headers = {"x-mock-options": s.mock_options} if s.mock_options else None
    async with ModelClient(base_url) as client:
        model = OpenAIChat(s.scenario, client=client, headers=headers)
        research = model.with_name("plan") if s.scenario == "research" else None
        tools = chapter_tools(sandbox, scan_seconds=s.scan_seconds, research=research, knobs=s.knobs())
        try:
            return await run(
                state, model=model, tools=tools, limits=s.limits(), policy=s.policy(), cancel=cancel,
                store=store, trace=JsonlTrace(store.directory / "traces" / f"{state.run_id}.jsonl"),
                on_progress=on_progress, checkpoint=checkpoint,
            )
        finally:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)


def _ctrl_c_cancels() -> Cancel:
    cancel, loop = Cancel(), asyncio.get_running_loop()

    def on_ctrl_c() -> None:
        cancel.set("user pressed Ctrl-C")
        print("   stopping and saving… (Ctrl-C again to quit without saving)", file=sys.stderr, flush=True)
        loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C raises KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, on_ctrl_c)
    except (ValueError, RuntimeError, NotImplementedError):
        pass  # not the main thread (or no signals here): Ctrl-C keeps its default meaning
    return cancel


def _finish(state: RunState, store: FileStore, args: argparse.Namespace, checkpoint) -> int:
    if not getattr(args, "no_resume", False):
        state = asyncio.run(_drive(state, store, args.base_url, checkpoint))
    else:
        store.save(state)
    print("\n".join(_report(state)), flush=True)
    return EXIT.get(state.status, 3)


def _cmd_run(args: argparse.Namespace, store: FileStore, checkpoint) -> int:
    names = {f.name for f in dataclasses.fields(Settings)}
    given = {k: v for k, v in vars(args).items() if k in names}
    settings = Settings(**{**given, "auto_approve": tuple(sorted(args.auto_approve))})
    state = new_run(args.task, system=SYSTEM, run_id=args.run_id, meta={"settings": to_dict(settings)})
    with store.claim(state.run_id):
        if store.path(state.run_id).exists():
            raise SystemExit(f"harness: run {state.run_id} already exists in {store.directory}")
        return _finish(state, store, args, checkpoint)


def _cmd_decide(args: argparse.Namespace, store: FileStore, checkpoint) -> int:
    with store.claim(args.run_id):
        state = store.load(args.run_id)
        if args.command == "approve":
            approve(state, args.call_id)
        else:
            reject(state, args.call_id, reason=args.reason, unsafe_empty=args.unsafe_empty)
        return _finish(state, store, args, checkpoint)


def _cmd_resume(args: argparse.Namespace, store: FileStore, checkpoint) -> int:
    with store.claim(args.run_id):
        state = store.load(args.run_id)
        # "running" on disk, with the claim ours, means the process that ran it died: resume it.
        if not (state.resumable or state.status == "running"):
            raise SystemExit(f"harness: run {state.run_id} is {state.status}; nothing to resume")
        changes = {k: getattr(args, k) for k in ("max_turns", "budget") if hasattr(args, k)}
        if changes:
            state.meta["settings"] = to_dict(dataclasses.replace(settings_of(state), **changes))
        return _finish(state, store, args, checkpoint)


def _cmd_show(args: argparse.Namespace, store: FileStore, checkpoint) -> int:
    state = store.load(args.run_id)
    print("\n".join(_report(state)))
    for c in pending(state) if state.resumable or state.status == "running" else ():
        print(safe(f"   pending: {c['id']} {c['function']['name']}({c['function']['arguments']})"))
    runs = ", ".join(r.label for r in state.tool_runs)
    print(safe(f"   tool runs: {runs or 'none'}"))
    print(f"   per-turn prompt tokens: {', '.join(str(u.prompt_tokens) for u in state.turn_usage) or 'none'}")
    if args.messages:
        for m in state.messages:
            print(safe(json.dumps(m, ensure_ascii=False)))
    return EXIT.get(state.status, 3)


def _turns(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is negative; a cap is a number >= 0")
    return n


def _max_turns(value: str) -> int | None:
    return None if value == "none" else _turns(value)


def _budget(value: str) -> float | None:
    return None if value == "none" else _amount(value)


def _amount(value: str) -> float:
    """A budget or a duration: a finite number >= 0 (`nan` would switch a budget off silently)."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number >= 0")
    return x


def _run_parser(sub: Any) -> None:
    d = Settings()
    r = sub.add_parser("run", help="start a run against a scenario (the model name)")
    r.add_argument("--scenario", default=d.scenario)
    r.add_argument("--task", default=DEFAULT_TASK)
    r.add_argument("--run-id", default=None)
    r.add_argument("--max-turns", type=_max_turns, default=d.max_turns,
                   help=f"turn cap, or 'none' (default: {d.max_turns})")
    r.add_argument("--budget", type=_budget, default=d.budget, help="dollars, or 'none' (default: none)")
    r.add_argument("--hard-budget", action="store_true",
                   help="cap max_tokens so spend never exceeds the budget")
    r.add_argument("--budget-check", choices=get_args(BudgetCheck), default=d.budget_check)
    r.add_argument("--dedupe", nargs="?", const="read-only", default=d.dedupe, choices=get_args(Dedupe))
    r.add_argument("--errors", choices=get_args(ErrorWording), default=d.errors)
    r.add_argument("--feed-back-permanent", action="store_true",
                   help="feed permanent tool errors back to the model instead of failing the run")
    r.add_argument("--auto-approve", action="append", default=[], metavar="TOOL")
    r.add_argument("--mock-options", default=d.mock_options, help="e.g. latency=250+fault=429@1x2")
    r.add_argument("--scan-seconds", type=_amount, default=d.scan_seconds)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description=__doc__.splitlines()[0])
    p.add_argument("--state-dir", type=Path, default=None,
                   help="where runs are saved (default: $HARNESS_STATE_DIR or ./state)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible /v1 URL (default: $LLM_BASE_URL)")
    sub = p.add_subparsers(dest="command", required=True)
    _run_parser(sub)
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
    unset = argparse.SUPPRESS  # absent unless given, so 'none' can lift a limit
    s.add_argument("--max-turns", type=_max_turns, default=unset, help="a new turn cap, or 'none'")
    s.add_argument("--budget", type=_budget, default=unset, help="a new budget in dollars, or 'none'")
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
    store = FileStore(state_dir, checkpoint=checkpoint)
    try:
        return COMMANDS[args.command](args, store, checkpoint)
    except (RunOwned, DecisionLost) as e:
        print(f"harness: refused: {safe(e)}", file=sys.stderr)
        return REFUSED
    except (FileNotFoundError, ValueError) as e:
        print(f"harness: {safe(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `harness run … | head -1`: the reader left; the run is saved anyway
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a planted symlink (ELOOP), a folder we may not write: a clear error
        print(f"harness: {safe(e)}", file=sys.stderr)
        return 2
