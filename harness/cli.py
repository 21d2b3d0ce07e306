"""`python -m harness` / `harness`: run a scenario, then approve, reject, resume, list or show it.

Runs are kept in a store named by one URL (`--store`, else $HARNESS_STORE, else the SQLite
database `harness.db` in the state folder; a password belongs in $HARNESS_STORE or ~/.pgpass,
as every local user sees a command line); the state folder (`--state-dir`, else
$HARNESS_STATE_DIR, else ./state) holds each new run's sandbox under `sandboxes/<id>/` and its
trace under `traces/<id>.jsonl`, and the run records both paths, so `approve RUN --store
postgresql://…` from another folder acts on the files of the run it approves. The settings a
run was started with (`Settings`) are kept in the run, so `resume` needs only the id. Ctrl-C
cancels the run through its signal: it is saved `interrupted/cancelled` and the command that
resumes it is printed. Exit status: 0 completed, 1 failed, 2 a usage error (resuming a finished
run), a bad store URL or a bad saved run (nothing written), 3 stopped but resumable, 4 refused:
the run id is taken, another live process owns the run or holds the SQLite file's write lock,
this process lost its lease (fenced), or the call already had a decision (this one lost and
changed nothing).

One writer per run: `run`, `resume`, `approve` and `reject` claim the run's lease (see
`harness.store`) before they load it and hold it to the end; a run whose owner died is taken
over after the lease (at once when the owner was a process of this host that is gone).
`harness list` and `harness show RUN --json` read runs for programs (`SHOW_JSON_VERSION`).
Everything a provider or a file controls is printed with control characters escaped (`\x1b`),
so a hostile id cannot redraw the screen.

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
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

from harness import listing
from harness.approvals import MAX_REASON_CHARS, DecisionLost, decide
from harness.chapter import (
    SYSTEM,
    BudgetCheck,
)
from harness.codec import to_dict
from harness.listing import safe
from harness.state import Approval, RunState, Status, new_run, pending
from harness.store import Fenced, LedgerConflict, RunOwned, SqlStore, StoreBusy
from harness.store.durability import DURABILITIES
from harness.ui import options as ui_options
from harness.wiring import (
    Dedupe,
    ErrorWording,
    Settings,
    cli_run,
    drive,
    open_cli_store,
    settings_of,
)

DEFAULT_TASK = "Which file mentions a timeout?"
EXIT = {"completed": 0, "failed": 1}
REFUSED = 4


class RunExists(Exception):
    """`harness run --run-id` of an id already taken: refused, the saved run left as it is."""


def _report(state: RunState) -> list[str]:
    return listing.report(state, _label(state), from_cli=cli_run(state))


def _label(state: RunState) -> str:
    if not cli_run(state):
        return "(not a CLI run)"  # saved through the Python API into the same folder
    s = settings_of(state)
    return f"{s.scenario}, cap {s.max_turns if s.max_turns is not None else 'none'}"


def _finish(state: RunState, store: SqlStore, args: argparse.Namespace, checkpoint) -> int:
    if not getattr(args, "no_resume", False):
        state = asyncio.run(drive(state, store, args, checkpoint))
    else:
        store.save(state)
    print("\n".join(_report(state)), flush=True)
    return EXIT.get(state.status, 3)


def _cmd_run(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    names = {f.name for f in dataclasses.fields(Settings)}
    given = {k: v for k, v in vars(args).items() if k in names}
    settings = Settings(**{**given, "auto_approve": tuple(sorted(args.auto_approve))})
    state = new_run(args.task, system=SYSTEM, run_id=args.run_id, meta={"settings": to_dict(settings)})
    state_dir = args.state_dir.absolute()
    state.meta["sandbox"] = str(state_dir / "sandboxes" / state.run_id)
    state.meta["trace"] = str(state_dir / "traces" / f"{state.run_id}.jsonl")
    state.meta["host"] = socket.gethostname()  # where the sandbox is: shown to whoever decides
    with store.claim(state.run_id):
        if store.exists(state.run_id):
            raise RunExists(f"run {state.run_id} already exists in {store.label}; nothing was written "
                            "(choose another --run-id, or resume it)")
        return _finish(state, store, args, checkpoint)


def _cmd_decide(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    with store.claim(args.run_id):
        state = store.load(args.run_id)
        last = state.meta.get("last_decision")
        if args.call_id is None and not isinstance(state.stop, Approval) and isinstance(last, dict):
            raise DecisionLost(
                f"run {state.run_id} is no longer waiting: call {safe(last.get('call_id'))!r} was already "
                f"{safe(last.get('verdict'))} by {safe(last.get('by'))}; "
                "this decision lost and changed nothing"
            )
        verdict = "approved" if args.command == "approve" else "rejected"
        decide(state, verdict, args.call_id, by=f"process {os.getpid()} on {socket.gethostname()}",
               reason=getattr(args, "reason", None), unsafe_empty=getattr(args, "unsafe_empty", False))
        return _finish(state, store, args, checkpoint)


def _cmd_resume(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    with store.claim(args.run_id):
        state = store.load(args.run_id)
        # "running" in the store, with the claim ours, means the process that ran it died: resume it.
        if not (state.resumable or state.status == "running"):
            raise ValueError(f"run {state.run_id} is {state.status}; nothing to resume")
        changes = {k: getattr(args, k) for k in ("max_turns", "budget") if hasattr(args, k)}
        if changes:
            state.meta["settings"] = to_dict(dataclasses.replace(settings_of(state), **changes))
        return _finish(state, store, args, checkpoint)


def _cmd_show(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    state = store.load(args.run_id)
    if args.json:
        print(json.dumps(listing.show_json(state, store), ensure_ascii=True))
        return EXIT.get(state.status, 3)
    print("\n".join(_report(state)))
    for c in pending(state) if state.resumable or state.status == "running" else ():
        print(safe(f"   pending: {c['id']} {c['function']['name']}({c['function']['arguments']})"))
    runs = ", ".join(r.label for r in state.tool_runs)
    print(safe(f"   tool runs: {runs or 'none'}"))
    print(f"   per-turn prompt tokens: {', '.join(str(u.prompt_tokens) for u in state.turn_usage) or 'none'}")
    if any(u.cached_tokens for u in state.turn_usage):
        print(f"   per-turn cached tokens: {', '.join(str(u.cached_tokens) for u in state.turn_usage)}")
    if args.messages:
        for m in state.messages:
            print(safe(json.dumps(m, ensure_ascii=False)))
    return EXIT.get(state.status, 3)


def _cmd_list(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    lines, damaged = listing.list_lines(store, args.status, as_json=args.json)
    print("\n".join(safe(line) for line in lines), flush=True)
    for message in damaged:  # the other runs are listed; each damaged one is named
        print(f"harness: {safe(message)}", file=sys.stderr)
    return 2 if damaged else 0


def _cmd_import(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    lines, damaged = listing.import_state(Path(args.directory), store)
    print("\n".join(safe(line) for line in lines))
    return 2 if damaged else 0


def _cmd_ui(args: argparse.Namespace, store: SqlStore, checkpoint) -> int:
    from harness.ui.serve import main  # starlette and uvicorn load for this command only

    return main(args, store)


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
    p.add_argument("--store", default=None, metavar="URL",
                   help="sqlite:///path/harness.db or postgresql://user@host/db "
                        "(default: $HARNESS_STORE, else STATE_DIR/harness.db); a password given "
                        "here is visible to every local user in ps: set $HARNESS_STORE instead, "
                        "or keep the password in ~/.pgpass")
    p.add_argument("--durability", choices=DURABILITIES, default=None,
                   help="what a saved turn survives: a killed process, or a power loss too "
                        "(default: $HARNESS_DURABILITY, else process-crash)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible /v1 URL (default: $LLM_BASE_URL)")
    sub = p.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    for name in ("approve", "reject"):
        d = sub.add_parser(name, help=f"{name} the call a run stopped for, then continue it")
        d.add_argument("run_id")
        d.add_argument("call_id", nargs="?")
        d.add_argument("--no-resume", action="store_true", help="record the decision only")
        if name == "reject":
            d.add_argument("--reason", required=True,
                           help=f"what the model is told, in words (at most {MAX_REASON_CHARS:,} characters)")
            d.add_argument("--unsafe-empty", action="store_true", help="allow an empty reason")
    s = sub.add_parser("resume", help="continue a stopped run")
    s.add_argument("run_id")
    unset = argparse.SUPPRESS  # absent unless given, so 'none' can lift a limit
    s.add_argument("--max-turns", type=_max_turns, default=unset, help="a new turn cap, or 'none'")
    s.add_argument("--budget", type=_budget, default=unset, help="a new budget in dollars, or 'none'")
    w = sub.add_parser("show", help="print a saved run")
    w.add_argument("run_id")
    w.add_argument("--messages", action="store_true")
    w.add_argument("--json", action="store_true",
                   help=f"the run as one versioned JSON object (version {listing.SHOW_JSON_VERSION})")
    ls = sub.add_parser("list", help="one line per saved run: id, status, turns, cost, waiting call")
    ls.add_argument("--status", choices=get_args(Status), default=None)
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    i = sub.add_parser("import-state", help="move the runs of an old state folder (<id>.json files) in")
    i.add_argument("directory")
    ui_options.add_parser(sub)
    return p


COMMANDS = {"run": _cmd_run, "approve": _cmd_decide, "reject": _cmd_decide, "resume": _cmd_resume,
            "show": _cmd_show, "list": _cmd_list, "import-state": _cmd_import, "ui": _cmd_ui}


def main(argv: Sequence[str] | None = None, *, checkpoint: Callable[[str], None] | None = None) -> int:
    """CLI entry point; `checkpoint` is the loop's test hook (see harness.loop)."""
    args = _parser().parse_args(argv)
    args.state_dir = args.state_dir or Path(os.environ.get("HARNESS_STATE_DIR") or "state")
    store = None
    try:
        store = open_cli_store(args, checkpoint)
        return COMMANDS[args.command](args, store, checkpoint)
    except (RunOwned, DecisionLost, Fenced, LedgerConflict, StoreBusy, RunExists) as e:
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
    finally:
        if store is not None:
            store.close()
