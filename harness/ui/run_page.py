"""One run: its facts, the call it waits for (with the two buttons), the stop, a chart of
tokens and cost per turn, the transcript, tool runs and ledger, and the trace.

Every section has an id; the page's script swaps sections in place when the run changes
(server-sent events), and keeps a half-typed rejection reason while the call is the same.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from harness.state import Approval, RunState, is_approved, pending, reason_of
from harness.ui.chart import svg
from harness.ui.decide import call_digest, last_decision_on
from harness.ui.layout import money, notice
from harness.ui.markup import Markup, html, join, pretty
from harness.ui.trace_view import chart_points, trace_table
from harness.ui.transcript import ledger_table, tool_runs_table, transcript


@dataclass(kw_only=True)
class RunView:
    """Everything the run page shows, read once per request."""

    state: RunState
    lease: dict[str, Any] | None
    ledger: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    trace_note: str | None = None
    resume_here: bool = False
    """The UI was started with --resume."""
    messages: list[Markup] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return bool(self.lease and self.lease.get("held"))


def _holder(lease: dict[str, Any]) -> str:
    h = lease.get("holder") or {}
    command = f" ({h.get('command')})" if h.get("command") else ""
    return f"process {h.get('pid', '?')} on {h.get('host', '?')}{command}"


def facts(v: RunView) -> Markup:
    s = v.state
    items = [("status", html('<span class="badge {}">{}</span>', s.status, s.status)),
             ("reason", reason_of(s)), ("turns", s.turns), ("tool runs", len(s.tool_runs)),
             ("prompt tokens", f"{s.prompt_tokens:,}"), ("completion tokens", f"{s.completion_tokens:,}"),
             ("cost", money(s.cost_usd)), ("time in run()", f"{s.elapsed_ms:,.0f} ms")]
    body = join(html('<div><span>{}</span>{}</div>', k, val) for k, val in items)
    lease = v.lease
    if v.held and lease:
        owner = html('<div class="box notice" id="readonly">Read-only: {} holds this run\'s lease '
                     '(epoch {}, {} s left). The page updates as it goes on.</div>',
                     _holder(lease), lease.get("epoch"), f"{lease.get('seconds_left', 0):.0f}")
    else:
        owner = Markup("")
    return html('<section data-swap id="summary"><div class="box facts">{}</div>{}</section>', body, owner)


def _call_box(s: RunState, stop: Approval) -> Markup:
    calls = {c["id"]: c for c in pending(s)}
    call = calls.get(stop.call_id)
    arguments = call["function"]["arguments"] if call else json.dumps(stop.args)
    doubt = (notice("error", "IN DOUBT: an earlier process started this write and died before recording "
                             "its result; it may already have happened. Approving runs it again.")
             if stop.in_doubt else Markup(""))
    return html('<p>The run stopped before <b>{}</b> (call <code>{}</code>) and waits for a decision.</p>'
                '{}<pre class="args" id="waiting-args">{}</pre>',
                stop.tool_name, stop.call_id, doubt, pretty(arguments))


def decision(v: RunView, csrf: str) -> Markup:
    s, stop = v.state, v.state.stop
    if not isinstance(stop, Approval):
        return html('<section data-swap id="decision"></section>')
    call = next((c for c in pending(s) if c["id"] == stop.call_id), None)
    last = last_decision_on(s, stop.call_id)
    box = _call_box(s, stop)
    if call is None or is_approved(s, call):
        what = _decided(last) if last else "It has a decision."
        then = _who_continues(v)
        return html('<section data-swap id="decision" data-digest=""><h2>Waiting call</h2>'
                    '<div class="box notice">{}<p id="decided">{} {}</p></div></section>', box, what, then)
    digest = call_digest(call)
    if v.held:
        return html('<section data-swap id="decision" data-digest="{}"><h2>Waiting call</h2>'
                    '<div class="box waiting">{}<p class="muted">Read-only while another process holds '
                    'the run.</p></div></section>', digest, box)
    target = f"/runs/{quote(s.run_id, safe='')}"
    hidden = html('<input type="hidden" name="csrf" value="{}">'
                  '<input type="hidden" name="call_id" value="{}">'
                  '<input type="hidden" name="digest" value="{}">', csrf, stop.call_id, digest)
    forms = html(
        '<form class="inline" method="post" action="{}/approve" id="approve-form">{}'
        '<button class="approve" type="submit" id="approve">Approve</button></form>'
        '<form class="inline" method="post" action="{}/reject" id="reject-form">{}'
        '<label>Reason (the model reads it):<br><textarea name="reason" id="reason" required '
        'maxlength="4000"></textarea></label><br>'
        '<button class="reject" type="submit" id="reject">Reject</button></form>',
        target, hidden, target, hidden)
    return html('<section data-swap id="decision" data-digest="{}"><h2>Waiting call</h2>'
                '<div class="box waiting">{}{}</div></section>', digest, box, forms)


def _who_continues(v: RunView) -> Markup | str:
    if not ("settings" in v.state.meta or "scenario" in v.state.meta):  # saved through the Python API
        return "Its program continues it (harness.run): the CLI and this UI do not know its tools."
    if v.resume_here:
        return "This UI resumes it (started with --resume)."
    return html("A worker continues it: <code>harness resume {}</code>.", v.state.run_id)


def _decided(last: dict[str, Any]) -> Markup:
    reason = html(' with the reason "{}"', last["reason"]) if last.get("reason") else Markup("")
    return html('Call <code>{}</code> was <b>{}</b>{} by {}.', last.get("call_id"), last.get("verdict"),
                reason, last.get("by"))


def stop_section(s: RunState) -> Markup:
    if s.stop is None:
        body = html("<p>Running (or its process died: <code>harness resume {}</code> takes it over "
                    "once the lease lapses).</p>", s.run_id)
    elif s.answer is not None:
        body = html('<p>Completed. The answer:</p><pre id="answer">{}</pre>', s.answer)
    elif s.error is not None:
        body = html('<p>Failed:</p><pre id="error">{}</pre>', s.error)
    else:
        resumable = " It is resumable." if s.resumable else ""
        body = html("<p>Stopped <b>{}</b>: {}.{}</p>", s.status, reason_of(s), resumable)
    return html('<section data-swap id="stop"><h2>The stop</h2><div class="box">{}</div></section>', body)


def chart_section(v: RunView) -> Markup:
    legend = html('<p class="legend"><span><i class="in"></i>prompt tokens</span>'
                  '<span><i class="out"></i>completion tokens</span><span><i class="cost"></i>cumulative cost'
                  '</span></p>')
    return html('<section data-swap id="chart"><h2>Tokens and cost per turn</h2>{}{}</section>',
                svg(chart_points(v.state, v.trace)), legend)


def run_body(v: RunView, csrf: str) -> Markup:
    s, here = v.state, quote(v.state.run_id, safe="")
    return html(
        '<h1 data-live="/runs/{}/events" data-page="/runs/{}">Run <code>{}</code></h1>'
        '<div id="messages">{}</div>{}{}{}{}'
        '<section data-swap id="transcript"><h2>Transcript</h2>{}</section>'
        '<section data-swap id="toolruns"><h2>Tool runs</h2>{}<h2>Tool ledger</h2>{}</section>'
        '<section data-swap id="trace"><h2>Trace</h2>{}</section>',
        here, here, s.run_id, join(v.messages), facts(v), decision(v, csrf), stop_section(s),
        chart_section(v), transcript(s), tool_runs_table(s), ledger_table(v.ledger),
        trace_table(v.trace, v.trace_note),
    )
