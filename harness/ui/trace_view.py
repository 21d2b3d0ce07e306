"""The run's trace, read from the file the run names, and the per-turn points of the chart.

The trace path comes from the run (`meta["trace"]`), so it is input: only an absolute path to
a regular file is read, never through a symlink, never a FIFO (opened non-blocking), and only
its last `MAX_TRACE_BYTES`; lines that are not JSON objects of this run are skipped.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

from harness.state import RunState
from harness.ui.chart import TurnPoint
from harness.ui.markup import Markup, html, join
from harness.usage import Pricing

MAX_TRACE_BYTES = 512 * 1024
MAX_TRACE_LINES = 500


def read_trace(state: RunState) -> tuple[list[dict[str, Any]], str | None]:
    """The run's trace events (oldest first) and a note when some or all could not be read."""
    path = state.meta.get("trace")
    if path is None:
        return [], "This run records no trace file."
    if not (isinstance(path, str) and os.path.isabs(path) and "\0" not in path):
        return [], "The run's trace path is not an absolute path; it was not read."
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return [], "The trace file does not exist (yet)."
    except OSError as e:
        return [], f"The trace file could not be opened ({e.strerror})."
    except ValueError:  # half a surrogate pair: no file system can hold that name
        return [], "The run's trace path cannot name a file; it was not read."
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return [], "The trace path is not a regular file; it was not read."
        cut = info.st_size > MAX_TRACE_BYTES
        f.seek(max(0, info.st_size - MAX_TRACE_BYTES))
        data = f.read(MAX_TRACE_BYTES)
    lines = data.decode("utf-8", errors="replace").splitlines()[1 if cut else 0:]
    events = []
    for text in lines:
        try:
            e = json.loads(text)
        except ValueError:
            continue
        if isinstance(e, dict) and e.get("runId") == state.run_id:
            events.append(e)
    note = "Only the end of a long trace is shown." if cut or len(events) > MAX_TRACE_LINES else None
    return events[-MAX_TRACE_LINES:], note


def chart_points(state: RunState, trace: list[dict[str, Any]]) -> list[TurnPoint]:
    """One point per turn: tokens from the run, cumulative cost from the trace when it has every
    turn, else priced at the default prices."""
    costs = [e.get("costUsd") for e in trace if e.get("type") == "turn"]
    if len(costs) != len(state.turn_usage) or not all(_a_cost(c) for c in costs):
        pricing, total, costs = Pricing(), 0.0, []
        for u in state.turn_usage:
            total += pricing.cost(u)
            costs.append(total)
    return [TurnPoint(turn=i + 1, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                      cost_usd=float(c))
            for i, (u, c) in enumerate(zip(state.turn_usage, costs, strict=True))]


def _a_cost(value: Any) -> bool:
    """A dollar figure the chart can scale to: a number, finite, not negative, not a bool (the trace
    is a file, and Python's json reads NaN and Infinity)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


def trace_table(events: list[dict[str, Any]], note: str | None) -> Markup:
    head = html('<p class="muted">{}</p>', note) if note else Markup("")
    if not events:
        return head
    rows = join(html('<tr><td>{}</td><td><pre>{}</pre></td></tr>', e.get("type"), json.dumps(
        {k: v for k, v in e.items() if k not in ("type", "runId")}, ensure_ascii=False)) for e in events)
    return html('{}<table><thead><tr><th>event</th><th>fields</th></tr></thead><tbody>{}</tbody></table>',
                head, rows)
