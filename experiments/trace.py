"""12. The trace: one JSON object per line, the run id on every line."""

from __future__ import annotations

import json

from experiments.common import Env, Outcome, run_scenario
from harness import Limits

NAME = "trace"
TITLE = "12 · Trace of a run stopped for approval (`destructive`)"
EXPECTED = ["turn", "tool_start", "tool_result", "turn", "approval_required", "run_stopped"]
CHAPTER_TRACE = """\
{"runId":"n1","type":"turn","turn":1,"prompt_tokens":204,"completion_tokens":23,"total_tokens":227,"costUsd":0.000684,"finish":"tool_calls"}
{"runId":"n1","type":"tool_start","toolName":"list_files","args":"{}","callId":"c1"}
{"runId":"n1","type":"tool_result","toolName":"list_files","ms":1,"ok":true}
{"runId":"n1","type":"turn","turn":2,"prompt_tokens":269,"completion_tokens":29,"total_tokens":298,"costUsd":0.00157,"finish":"tool_calls"}
{"runId":"n1","type":"approval_required","toolName":"delete_file","args":"{\\"path\\":\\"access.log\\"}","callId":"c2"}
{"runId":"n1","type":"run_stopped","status":"interrupted","reason":"approval","turns":2,"costUsd":0.00157}"""


async def measure(env: Env) -> Outcome:
    r = await run_scenario(env, "destructive", run_id="n1", limits=Limits(max_turns=20))
    events = r.trace.events
    lines = r.trace.lines()
    turns = [e for e in events if e["type"] == "turn"]
    rows = [
        {"line": i + 1, "type": e["type"], "json": json.dumps(e, separators=(",", ":"))}
        for i, e in enumerate(events)
    ]
    return Outcome(
        rows=rows,
        table=[{"line": row["line"], "type": row["type"]} for row in rows],
        finding=(
            f"A run stopped for approval leaves {len(lines)} trace lines — "
            f"{', '.join(e['type'] for e in events)} — each carrying the run id, each `turn` line its "
            "own tokens and the cumulative cost, and `run_stopped` the reason."
        ),
        ours=f"{len(lines)} lines: {', '.join(e['type'] for e in events)}",
        chapter="6 lines: turn, tool_start, tool_result, turn, approval_required, run_stopped",
        notes=[
            "Ours (the `ms` of `tool_result` is wall time):\n\n```jsonl\n" + "\n".join(lines) + "\n```",
            "The chapter's:\n\n```jsonl\n" + CHAPTER_TRACE + "\n```",
        ],
        checks={
            "the six event types in order": [e["type"] for e in events] == EXPECTED,
            "the run id on every line": all(e.get("runId") == "n1" for e in events),
            "turn lines carry tokens and cumulative cost": all(
                {"prompt_tokens", "completion_tokens", "total_tokens", "costUsd", "finish"} <= e.keys()
                for e in turns
            )
            and turns[-1]["costUsd"] >= turns[0]["costUsd"],
            "run_stopped says why": events[-1].get("reason") == "approval"
            and events[-1].get("status") == "interrupted",
        },
    )
