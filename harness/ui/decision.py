"""The decision screen: what a person must know to approve or reject a call, on one screen.

Above the arguments, five lines answer the questions a person has before deciding: the **task**
(the user's request), the **tool** (its description; whether it writes), **why it asks** (the
rule that stopped the run), **where** the effect lands (the run's folder, and on which host),
and what each button does **next** (runs the call now in this process, or records the decision
for a worker). Then every argument (`arguments.py`). The two buttons sit in a bar fixed to the
bottom of the window, in view however far the page is scrolled.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.approvals import MAX_REASON_CHARS
from harness.chapter import chapter_tools
from harness.state import Approval, RunState, is_approved, pending
from harness.tools import Tool
from harness.ui.arguments import arguments_box, parsed, previous_call
from harness.ui.decide import call_digest, form_call_id, last_decision_on
from harness.ui.markup import Markup, html
from harness.ui.transcript import message_text
from harness.ui.view import RunView
from harness.wiring import cli_run, settings_of

TASK_CHARS = 300
"""A task longer than this is folded to its start (all of it one click away)."""


def task_of(state: RunState) -> str:
    """The user's request: the run's first user message."""
    first = next((m for m in state.messages if m.get("role") == "user"), None)
    return message_text(first.get("content")) if first else ""


def _task(state: RunState) -> Markup:
    text = task_of(state)
    if len(text) <= TASK_CHARS:
        return html('<dd id="task" class="task">{}</dd>', text)
    return html('<dd id="task" class="task"><details><summary>{}… <span class="size">{} characters</span>'
                '</summary>{}</details></dd>', text[:TASK_CHARS], f"{len(text):,}", text[TASK_CHARS:])


def _cli_tool(name: str) -> Tool | None:
    """The tool the CLI wires for this run (the chapter's catalog), or None."""
    return next((t for t in chapter_tools(Path("/")) if t.name == name), None)


def _tool(state: RunState, stop: Approval) -> Markup:
    if not cli_run(state):
        return html('<dd id="tool"><b>{}</b>: its description is not known here (the run was saved from '
                    'Python, whose program holds its tools).</dd>', stop.tool_name)
    tool = _cli_tool(stop.tool_name)
    if tool is None:
        return html('<dd id="tool"><b>{}</b>: not a tool of the CLI\'s catalog.</dd>', stop.tool_name)
    kind = html('<span class="badge {}">{}</span>', "read_only" if tool.read_only else "writes",
                "read-only" if tool.read_only else "writes")
    return html('<dd id="tool"><b>{}</b> {} {}</dd>', tool.name, kind, tool.description)


def _why(state: RunState, stop: Approval) -> Markup:
    bound = html(" Approval covers exactly these arguments: if the saved call changes, nothing is decided.")
    if stop.in_doubt:
        return html('<dd id="why"><b>In doubt:</b> an earlier process started this write and died before '
                    'recording its result, so it may already have happened; the harness never repeats a '
                    'write on its own. Approving runs it again.{}</dd>', bound)
    if not cli_run(state):
        return html("<dd id=\"why\">The run's own program marks {} as needing a person's approval.{}</dd>",
                    stop.tool_name, bound)
    try:
        auto = settings_of(state).auto_approve
    except ValueError:
        auto = ()
    tool = _cli_tool(stop.tool_name)
    what = "it writes" if tool is not None and not tool.read_only else "its catalog entry says so"
    listed = f"names only {', '.join(auto)}" if auto else "names no tool"
    return html("<dd id=\"why\">{} needs a person's approval: the tool is marked <code>needs_approval</code> "
                "({}), and this run's <code>--auto-approve</code> {}.{}</dd>",
                stop.tool_name, what, listed, bound)


def _where(v: RunView) -> Markup:
    s = v.state
    if not cli_run(s):
        return html('<dd id="where">Wherever its program\'s tools act: a run saved from Python records no '
                    'folder this UI knows.</dd>')
    sandbox = s.meta.get("sandbox")
    if isinstance(sandbox, str):
        folder = html("the folder <code>{}</code>", sandbox)
    else:
        folder = html("the folder <code>sandboxes/{}</code> of the state folder of whoever resumes it",
                      s.run_id)
    started = s.meta.get("host") if isinstance(s.meta.get("host"), str) else None
    here = socket.gethostname()
    if v.resume_here:
        moved = started is not None and started != here
        also = html("; the run started on host <code>{}</code>", started) if moved else ""
        return html('<dd id="where">In {} on host <code>{}</code> (this UI\'s machine){}.</dd>',
                    folder, here, also)
    origin = html(" (the run started on host <code>{}</code>)", started) if started else Markup("")
    return html('<dd id="where">In {} on the machine of the worker that resumes it{}.</dd>', folder, origin)


def _next(v: RunView, stop: Approval) -> Markup:
    s, name = v.state, stop.tool_name
    if not cli_run(s):
        approve = html("Approve records the decision only: its program continues the run (harness.run in "
                       "Python) and runs {}; this UI cannot run its tools.", name)
    elif v.resume_here:
        approve = html("Approve <b>runs {} now, in this process</b> (process {} on <code>{}</code>), then "
                       "continues the run to its next stop.", name, os.getpid(), socket.gethostname())
    else:
        approve = html("Approve <b>records the decision</b> only: the run stays stopped until a worker "
                       "runs <code>harness resume {}</code> (on any machine sharing this store), which then "
                       "runs {}.", s.run_id, name)
    reject = html("Rejecting writes your reason into the transcript instead: {} does not run, and the model "
                  "reads the reason on its next turn.", name)
    return html('<dd id="next">{} {}</dd>', approve, reject)


def brief(v: RunView, stop: Approval) -> Markup:
    return html('<dl class="brief"><dt>Task</dt>{}<dt>Tool</dt>{}<dt>Why it asks</dt>{}<dt>Where</dt>{}'
                '<dt>Next</dt>{}</dl>', _task(v.state), _tool(v.state, stop), _why(v.state, stop), _where(v),
                _next(v, stop))


def _call(s: RunState, stop: Approval, call: dict[str, Any] | None) -> Markup:
    args = parsed(call["function"]["arguments"]) if call else stop.args
    tool = _cli_tool(stop.tool_name) if cli_run(s) else None
    properties = tool.parameters.get("properties") if tool is not None else None
    declared = tuple(properties) if isinstance(properties, dict) else ()
    return arguments_box(args, previous_call(s, stop.tool_name, stop.call_id), declared)


def decision(v: RunView, csrf: str) -> Markup:
    s, stop = v.state, v.state.stop
    if not isinstance(stop, Approval):
        return html('<section data-swap id="decision"></section>')
    call = next((c for c in pending(s) if c["id"] == stop.call_id), None)
    head = html('<h2>Waiting for a decision: <b>{}</b> <span class="muted">call <code>{}</code></span></h2>',
                stop.tool_name, stop.call_id)
    if call is None or is_approved(s, call):
        last = last_decision_on(s, stop.call_id)
        what = _decided(last) if last else "It has a decision."
        return html('<section data-swap id="decision" data-digest=""><div class="box notice">{}{}'
                    '<p id="decided">{} {}</p></div></section>', head, _call(s, stop, call), what,
                    _who_continues(v))
    digest = call_digest(call)
    if v.held:
        return html('<section data-swap id="decision" data-digest="{}"><div class="box waiting">{}{}{}'
                    '<p class="muted">Read-only while another process holds the run.</p></div></section>',
                    digest, head, brief(v, stop), _call(s, stop, call))
    return html('<section data-swap id="decision" data-digest="{}"><div class="box waiting">{}{}{}</div>{}'
                '</section>', digest, head, brief(v, stop), _call(s, stop, call), _bar(s, stop, csrf, digest))


def _bar(s: RunState, stop: Approval, csrf: str, digest: str) -> Markup:
    target = f"/runs/{quote(s.run_id, safe='')}"
    hidden = html('<input type="hidden" name="csrf" value="{}">'
                  '<input type="hidden" name="call_id" value="{}">'
                  '<input type="hidden" name="digest" value="{}">', csrf, form_call_id(stop.call_id), digest)
    return html(
        '<div class="decide-bar" id="decide-bar"><div class="inner">'
        '<form method="post" action="{}/approve" id="approve-form">{}'
        '<button class="approve" type="submit" id="approve">Approve {}</button></form>'
        '<form method="post" action="{}/reject" id="reject-form">{}'
        '<textarea name="reason" id="reason" required maxlength="{}" aria-label="reason" '
        'placeholder="Why not? The model reads your reason (required to reject)."></textarea>'
        '<button class="reject" type="submit" id="reject">Reject</button></form></div></div>',
        target, hidden, stop.tool_name, target, hidden, MAX_REASON_CHARS)


def _who_continues(v: RunView) -> Markup | str:
    if not cli_run(v.state):  # saved through the Python API
        return "Its program continues it (harness.run): the CLI and this UI do not know its tools."
    if v.resume_here:
        return "This UI resumes it (started with --resume)."
    return html("A worker continues it: <code>harness resume {}</code>.", v.state.run_id)


def _decided(last: dict[str, Any]) -> Markup:
    reason = html(' with the reason "{}"', last["reason"]) if last.get("reason") else Markup("")
    return html('Call <code>{}</code> was <b>{}</b>{} by {}.', last.get("call_id"), last.get("verdict"),
                reason, last.get("by"))
