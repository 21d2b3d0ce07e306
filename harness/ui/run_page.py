"""One run: the decision screen when it waits for one (`decision.py`), its facts, the stop, a
chart of tokens and cost per turn, the transcript, tool runs and ledger, and the trace.

Every section has an id; the page's script swaps sections in place when the run changes
(server-sent events), and keeps a half-typed rejection reason while the call is the same.
"""

from __future__ import annotations

from urllib.parse import quote

from harness.state import RunState, reason_of
from harness.ui.chart import svg
from harness.ui.decision import decision
from harness.ui.layout import money
from harness.ui.markup import Markup, html, join
from harness.ui.trace_view import chart_points, trace_table
from harness.ui.transcript import ledger_table, tool_runs_table, transcript
from harness.ui.view import RunView, holder


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
                     holder(lease), lease.get("epoch"), f"{lease.get('seconds_left', 0):.0f}")
    else:
        owner = Markup("")
    return html('<section data-swap id="summary"><div class="box facts">{}</div>{}</section>', body, owner)


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
        here, here, s.run_id, join(v.messages), decision(v, csrf), facts(v), stop_section(s),
        chart_section(v), transcript(s), tool_runs_table(s), ledger_table(v.ledger),
        trace_table(v.trace, v.trace_note),
    )
