"""Runs read by programs: `harness list`, `harness show RUN --json`, `harness import-state DIR`.

`show --json` prints one object whose shape is versioned (`SHOW_JSON_VERSION`; a field is
only ever added within a version):

    {"version": 1, "store": "<URL, password masked>", "run_id": str,
     "status": "running|completed|failed|max_turns_exceeded|budget_exceeded|interrupted",
     "reason": str, "resumable": bool, "turns": int, "cost_usd": float,
     "usage": {"prompt_tokens": int, "completion_tokens": int},
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
from pathlib import Path
from typing import Any

from harness.codec import StateFileError, to_dict
from harness.state import Approval, RunState, pending, reason_of
from harness.store import SqlStore
from harness.store import files as old_files

SHOW_JSON_VERSION = 1


def show_json(state: RunState, store: SqlStore) -> dict[str, Any]:
    stop = state.stop
    waiting = ({"call_id": stop.call_id, "tool_name": stop.tool_name, "args": stop.args,
                "in_doubt": stop.in_doubt} if isinstance(stop, Approval) else None)
    return {
        "version": SHOW_JSON_VERSION, "store": store.label, "run_id": state.run_id,
        "status": state.status, "reason": reason_of(state), "resumable": state.resumable,
        "turns": state.turns, "cost_usd": state.cost_usd, "usage": to_dict(state.usage),
        "waiting": waiting, "answer": state.answer, "error": state.error,
        "pending": [{"call_id": c["id"], "tool_name": c["function"]["name"],
                     "arguments": c["function"]["arguments"]} for c in pending(state)],
        "tool_runs": [{"call_id": r.call_id, "tool": r.tool, "args": r.args, "ok": r.ok, "ms": r.ms}
                      for r in state.tool_runs],
        "ledger": store.ledger(state.run_id), "lease": store.lease(state.run_id),
        "sandbox": state.meta.get("sandbox"), "settings": state.meta.get("settings"),
        "run": to_dict(state),
    }


def list_lines(store: SqlStore, status: str | None, *, as_json: bool) -> list[str]:
    runs = store.list_runs(status)
    if as_json:
        return [json.dumps(to_dict(r)) for r in runs]
    lines = [f"{'run id':<20} {'status':<20} {'turns':>5} {'cost':>10}  waiting call"]
    for r in runs:
        waiting = f"{r.waiting_call} {r.waiting_tool}" if r.waiting_call else "-"
        lines.append(f"{r.run_id:<20} {r.status:<20} {r.turns:>5} ${r.cost_usd:>9.6f}  {waiting}")
    return lines


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
        if store.exists(run_id):
            lines.append(f"skipped {run_id}: already in {store.label}")
            continue
        state.meta.setdefault("sandbox", str((directory / "sandboxes" / run_id).absolute()))
        state.meta.setdefault("trace", str((directory / "traces" / f"{run_id}.jsonl").absolute()))
        with store.claim(run_id):
            store.save(state)
        moved += 1
        lines.append(f"imported {run_id} ({state.status}, {state.turns} turns)")
    lines.append(f"{moved} run(s) imported into {store.label}, {damaged} damaged (left in {directory})")
    return lines, damaged
