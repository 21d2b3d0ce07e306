"""The list of runs: status, turns, cost, the call each one waits for; filtered by status."""

from __future__ import annotations

import time
from typing import get_args
from urllib.parse import quote

from harness.state import Status
from harness.store import RunSummary
from harness.ui.layout import money, notice
from harness.ui.markup import Markup, html, join

STATUSES: tuple[str, ...] = get_args(Status)
MAX_LISTED = 500
"""Rows drawn on the list; older runs are reached by filtering, `harness list` or /api/runs."""


def _when(t: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
    except (OverflowError, OSError, ValueError):
        return "?"


def _row(r: RunSummary) -> Markup:
    waiting = (html('<code>{}</code> {}', r.waiting_call, r.waiting_tool) if r.waiting_call
               else html('<span class="muted">-</span>'))
    return html(
        '<tr data-run="{}"><td><a href="/runs/{}">{}</a></td><td><span class="badge {}">{}</span></td>'
        '<td class="num">{}</td><td class="num">{}</td><td>{}</td><td class="muted">{}</td></tr>',
        r.run_id, quote(r.run_id, safe=""), r.run_id, r.status, r.status, r.turns, money(r.cost_usd),
        waiting, _when(r.updated_at),
    )


def filter_nav(current: str | None) -> Markup:
    links = [html('<a href="/" class="{}">all</a>', "on" if current is None else "")]
    links += [html('<a href="/?status={}" class="{}">{}</a>', s, "on" if s == current else "", s)
              for s in STATUSES]
    return html('<nav class="filter">Status: {}</nav>', join(links))


def runs_body(runs: list[RunSummary], status: str | None, store_label: str,
              damaged: list[str] | tuple[str, ...] = ()) -> Markup:
    """The list; each damaged `runs` row named above it (the rest are listed, as `harness list` does)."""
    shown = runs[-MAX_LISTED:]
    rows = join(_row(r) for r in reversed(shown)) if runs else html(
        '<tr><td colspan="6" class="muted">No runs{}.</td></tr>', f" with status {status}" if status else "")
    if len(shown) < len(runs):
        rows = html('{}<tr><td colspan="6" class="muted" id="more">The {} newest of {} runs are shown; '
                    'filter by status, or read them all at /api/runs.</td></tr>', rows, len(shown), len(runs))
    return html(
        '<h1>Runs</h1><p class="muted">Store: <code>{}</code> · newest first · updates live</p>{}{}'
        '<table id="runs" data-live="/events{}"><thead><tr><th>run id</th><th>status</th>'
        '<th class="num">turns</th><th class="num">cost</th><th>waiting call</th><th>updated (UTC)</th>'
        '</tr></thead><tbody data-swap id="runs-body">{}</tbody></table>',
        store_label, join(notice("error", d) for d in damaged), filter_nav(status),
        f"?status={status}" if status else "", rows,
    )
