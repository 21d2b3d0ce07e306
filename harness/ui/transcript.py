"""The transcript as the model saw it, the tool runs and the tool ledger, as escaped HTML."""

from __future__ import annotations

import json
from typing import Any

from harness.state import RunState
from harness.ui.markup import Markup, html, join, pretty

MAX_SHOWN = 20_000
"""Characters of one message shown in full; the rest is cut with a note (the run keeps it all)."""


def message_text(content: Any) -> str:
    """A message's content as text (content parts joined), cut at `MAX_SHOWN` with a note."""
    if content is None:
        return ""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):  # content parts: show their text, else their JSON
        text = "\n".join(p.get("text") if isinstance(p, dict) and isinstance(p.get("text"), str)
                         else json.dumps(p, ensure_ascii=False) for p in content)
    else:
        text = json.dumps(content, ensure_ascii=False)
    if len(text) > MAX_SHOWN:
        return f"{text[:MAX_SHOWN]}\n… ({len(text) - MAX_SHOWN:,} more characters not shown)"
    return text


def _call(c: Any) -> Markup:
    fn = c.get("function") if isinstance(c, dict) else None
    if not isinstance(fn, dict):
        return html('<div class="call"><pre>{}</pre></div>', json.dumps(c, ensure_ascii=False))
    return html('<div class="call" data-call="{}">call <code>{}</code> → <b>{}</b><pre>{}</pre></div>',
                c.get("id"), c.get("id"), fn.get("name"), pretty(message_text(fn.get("arguments"))))


def _message(i: int, m: dict[str, Any], names: dict[str, str]) -> Markup:
    role = str(m.get("role"))
    head = html('<span class="role">{}</span>', role)
    if role == "tool":
        cid = m.get("tool_call_id")
        head = html('{} <span class="muted">result of call <code>{}</code> ({})</span>', head, cid,
                    m.get("name") or names.get(str(cid), "?"))
    text = message_text(m.get("content"))
    content = html("<pre>{}</pre>", text) if text else (
        html('<pre class="muted">(empty)</pre>') if role == "tool" else Markup(""))
    calls = join(_call(c) for c in m.get("tool_calls") or ())
    return html('<article class="msg {}" id="m{}">{}{}{}</article>', role, i, head, content, calls)


def transcript(s: RunState) -> Markup:
    names = {c["id"]: c["function"].get("name") for m in s.messages for c in m.get("tool_calls") or ()
             if isinstance(c, dict) and isinstance(c.get("function"), dict) and "id" in c}
    return join(_message(i, m, names) for i, m in enumerate(s.messages))


def tool_runs_table(s: RunState) -> Markup:
    if not s.tool_runs:
        return html('<p class="muted">No tool has run.</p>')
    rows = join(html('<tr><td><code>{}</code></td><td>{}</td><td><pre>{}</pre></td><td>{}</td>'
                     '<td class="num">{}</td></tr>', r.call_id, r.tool, pretty(r.args),
                     "ok" if r.ok else "error", f"{r.ms:,.0f}") for r in s.tool_runs)
    return html('<table><thead><tr><th>call</th><th>tool</th><th>arguments</th><th>result</th>'
                '<th class="num">ms</th></tr></thead><tbody>{}</tbody></table>', rows)


def ledger_table(ledger: list[dict[str, Any]]) -> Markup:
    if not ledger:
        return html('<p class="muted">No write was started.</p>')
    rows = join(html('<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class="num">{}</td>'
                     '<td class="num">{}</td></tr>', r.get("call_id"), r.get("tool"), r.get("state"),
                     r.get("attempt"), r.get("epoch")) for r in ledger)
    return html('<table><thead><tr><th>call</th><th>tool</th><th>state</th><th class="num">attempt</th>'
                '<th class="num">epoch</th></tr></thead><tbody>{}</tbody></table>', rows)
