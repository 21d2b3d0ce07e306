"""How the CLI shows runs: to a person (the chapter's summary line, how a run stopped, the next
command), to programs (`harness list`, `harness show RUN --json`), and `harness import-state DIR`.

Everything a provider or a saved run controls is printed through `safe`, with control characters
escaped (`\x1b`), so a hostile id or reply cannot redraw the screen.

`show --json` prints one object whose shape is versioned (`SHOW_JSON_VERSION`; a field is
only ever added within a version):

    {"version": 1, "store": "<URL, password masked>", "run_id": str,
     "status": "running|completed|failed|max_turns_exceeded|budget_exceeded|interrupted",
     "reason": str, "resumable": bool, "turns": int, "cost_usd": float,
     "usage": {"prompt_tokens": int, "completion_tokens": int, "cached_tokens": int,
               "cache_write_tokens": int, "reasoning_tokens": int},
     "waiting": {"call_id", "tool_name", "args", "in_doubt"} | null,
     "answer": str | null, "error": str | null,
     "pending": [{"call_id", "tool_name", "arguments"}],
     "tool_runs": [{"call_id", "tool", "args", "ok", "ms"}],
     "ledger": [{"call_id", "tool", "state": "intent|done|abandoned", "attempt", "epoch"}],
     "lease": {"epoch", "held", "holder", "seconds_left"} | null,
     "sandbox": str | null, "settings": object | null,
     "run": <the saved run itself, with its own schema_version>}

`list --json` prints one object per line: run_id, status, turns, cost_usd, waiting_call,
waiting_tool, updated_at. Both read the same whichever store holds the runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.codec import StateFileError, to_dict
from harness.state import Approval, CancelledBy, MaxBudget, RunState, pending, reason_of
from harness.store import SqlStore
from harness.store import files as old_files
from harness.trace import money

SHOW_JSON_VERSION = 1
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")


def safe(text: object) -> str:
    """`text` with every control character visibly escaped (`\x1b`, `\n`): a provider's or a
    file's string cannot move the cursor, recolour, or redraw what the person is reading."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def summary_line(state: RunState, label: str) -> str:
    """The chapter's one-line account of a run."""
    return (
        f"{label:<14}  turns={state.turns}  tools={len(state.tool_runs)}  in={state.prompt_tokens}  "
        f"out={state.completion_tokens}  cost=${state.cost_usd:.6f}  ms={state.elapsed_ms:.0f}  "
        f"status={state.status}"
    )


def report(state: RunState, label: str, *, from_cli: bool) -> list[str]:
    """What a person reads after a command: the summary line, how the run stopped, what to do next."""
    lines = [safe(summary_line(state, label))]
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
        lines.append(_next_step(from_cli, f"decide:  harness approve {rid} {cid}   |   "
                                          f"harness reject {rid} {cid} --reason \"...\""))
    elif isinstance(stop, CancelledBy):
        lines.append(f"   interrupted / cancelled: {safe(stop.reason)}")
        lines.append(_next_step(from_cli, f"resume:  harness resume {rid}"))
    else:
        lines.append(f"   stopped: {state.status} ({safe(reason_of(state))})")
        lines.append(_next_step(from_cli, f"raise the limit and run: {_raise_limit(state)}"))
    lines.append(f"   run id: {rid}")
    return lines


def _raise_limit(state: RunState) -> str:
    """A resume command that works as printed: the limit that stopped the run, doubled."""
    if isinstance(state.stop, MaxBudget):
        budget = f"{max(2 * state.cost_usd, 0.000001):.6f}".rstrip("0").rstrip(".")
        return f"harness resume {state.run_id} --budget {budget}"
    return f"harness resume {state.run_id} --max-turns {max(2 * state.turns, 1)}"


def _next_step(from_cli: bool, command: str) -> str:
    if from_cli:
        return f"   {command}"
    return ("   continue it from Python (harness.approve / reject, then harness.run): "
            "the CLI does not know its tools")


def _quoted(call_id: str) -> str:
    """A call id as a shell word: plain when it is one, else escaped and quoted (never raw)."""
    return call_id if re.fullmatch(r"[A-Za-z0-9._:-]+", call_id) else repr(safe(call_id))


def show_json(state: RunState, store: SqlStore) -> dict[str, Any]:
    stop = state.stop
    waiting = ({"call_id": stop.call_id, "tool_name": stop.tool_name, "args": stop.args,
                "in_doubt": stop.in_doubt} if isinstance(stop, Approval) else None)
    return {
        "version": SHOW_JSON_VERSION, "store": store.label, "run_id": state.run_id,
        "status": state.status, "reason": reason_of(state), "resumable": state.resumable,
        "turns": state.turns, "cost_usd": money(state.cost_usd), "usage": to_dict(state.usage),
        "waiting": waiting, "answer": state.answer, "error": state.error,
        "pending": [{"call_id": c["id"], "tool_name": c["function"]["name"],
                     "arguments": c["function"]["arguments"]} for c in pending(state)],
        "tool_runs": [{"call_id": r.call_id, "tool": r.tool, "args": r.args, "ok": r.ok, "ms": r.ms}
                      for r in state.tool_runs],
        "ledger": store.ledger(state.run_id), "lease": store.lease(state.run_id),
        "sandbox": state.meta.get("sandbox"), "settings": state.meta.get("settings"),
        "run": to_dict(state),
    }


def list_lines(store: SqlStore, status: str | None, *, as_json: bool) -> tuple[list[str], list[str]]:
    """The lines of `harness list`, and one message per damaged `runs` row (left out of them)."""
    listing = store.scan_runs(status)
    if as_json:
        lines = [json.dumps({**to_dict(r), "cost_usd": money(r.cost_usd)}) for r in listing.runs]
        return lines, listing.damaged
    lines = [f"{'run id':<20} {'status':<20} {'turns':>5} {'cost':>10}  waiting call"]
    for r in listing.runs:
        waiting = f"{r.waiting_call} {r.waiting_tool}" if r.waiting_call else "-"
        lines.append(f"{r.run_id:<20} {r.status:<20} {r.turns:>5} ${r.cost_usd:>9.6f}  {waiting}")
    return lines, listing.damaged


def import_state(directory: Path, store: SqlStore) -> tuple[list[str], int]:
    """Copy every run of an old state folder into `store` (runs already there are skipped);
    the lines to print and how many runs were damaged (those are left where they are)."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a folder of saved runs")
    lines, damaged, moved = [], 0, 0
    for run_id in old_files.run_ids(directory):
        try:
            state = old_files.read_run(directory, run_id)
        except (StateFileError, OSError) as e:
            damaged += 1
            lines.append(f"skipped {run_id}: {e}")
            continue
        state.meta.setdefault("sandbox", str((directory / "sandboxes" / run_id).absolute()))
        state.meta.setdefault("trace", str((directory / "traces" / f"{run_id}.jsonl").absolute()))
        with store.claim(run_id):  # looked for under the claim: a run made meanwhile is never overwritten
            if store.exists(run_id):
                lines.append(f"skipped {run_id}: already in {store.label}")
                continue
            store.save(state)
        moved += 1
        lines.append(f"imported {run_id} ({state.status}, {state.turns} turns)")
    lines.append(f"{moved} run(s) imported into {store.label}, {damaged} damaged (left in {directory})")
    return lines, damaged
