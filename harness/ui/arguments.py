"""A waiting call's arguments as a person must read them: every key on its own line, in the
order the model wrote them; a long value folded to one line with its size (all of it one click
away); and, against the previous call of the same tool, what changed.

A model can pad a call (a 100 kB filler value before the key that matters): folding keeps every
key on the first screen, so the one that names the target cannot be pushed out of sight.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.state import RunState
from harness.ui.markup import Markup, html, join

FOLD_CHARS = 160
"""A value whose JSON is longer than this is folded to a preview and its size."""
PREVIEW_CHARS = 80
RESULT_CHARS = 200
"""How much of an earlier call's result is quoted."""


def parsed(arguments: Any) -> Any:
    """The arguments as the tool would get them: the call's JSON text parsed (duplicate keys
    resolved as the loop resolves them), or the text itself when it is not JSON."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments


@dataclass(frozen=True, kw_only=True)
class Previous:
    """The last earlier call of the same tool in the run, and what became of it."""

    call_id: str
    args: Any
    outcome: str
    """"ran: <its result>", "was rejected: <reason>", or that it has no result."""


def previous_call(state: RunState, tool: str, call_id: str) -> Previous | None:
    calls = [c for m in state.messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()
             if isinstance(c, dict) and isinstance(c.get("function"), dict)]
    ids = [c.get("id") for c in calls]
    here = ids.index(call_id) if call_id in ids else len(calls)
    earlier = [c for c in calls[:here] if c["function"].get("name") == tool]
    if not earlier:
        return None
    last = earlier[-1]
    rejected = [r.reason for r in state.rejections if r.call_id == last.get("id")]
    results = [m.get("content") for m in state.messages
               if m.get("role") == "tool" and m.get("tool_call_id") == last.get("id")]
    if rejected:
        outcome = f"was rejected: {_cut(rejected[-1])}"
    elif results:
        outcome = f"ran: {_cut(results[-1] if isinstance(results[-1], str) else json.dumps(results[-1]))}"
    else:
        outcome = "has no result"
    return Previous(call_id=str(last.get("id")), args=parsed(last["function"].get("arguments")),
                    outcome=outcome)


def _cut(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else f"{text[:RESULT_CHARS]}… ({len(text):,} characters)"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _size(value: Any, text: str) -> str:
    if isinstance(value, str):
        return f"{len(value):,} characters"
    return f"{len(text):,} characters of JSON"


def value_html(value: Any) -> Markup:
    """One value as JSON: whole when short, else folded to a preview and its size."""
    text = _json(value)
    if len(text) <= FOLD_CHARS:
        return html('<span class="val">{}</span>', text)
    full = json.dumps(value, ensure_ascii=False, indent=2) if isinstance(value, dict | list) else text
    return html('<details><summary><span class="val">{}…</span> <span class="size">{}</span> '
                '<span class="muted">· show all</span></summary><pre class="full">{}</pre></details>',
                text[:PREVIEW_CHARS], _size(value, text), full)


def key_html(key: str) -> Markup:
    """An argument's name: the model writes it too, so a long one is folded like a value."""
    return html('<span class="key">{}</span>', value_html(key))


def _row(key: str, value: Any, before: Any, compared: bool, missing: object) -> Markup:
    long = len(_json(value)) > FOLD_CHARS
    changed = compared and before is not missing and before != value
    new = compared and before is missing
    classes = " ".join(c for c, on in (("arg", True), ("long", long), ("changed", changed or new)) if on)
    if changed:
        note = html(' <span class="was">was {}</span>', value_html(before))
    elif new:
        note = html(' <span class="was">new</span>')
    else:
        note = Markup("")
    return html('<div class="{}" data-arg="{}">{}: {}{}</div>',
                classes, key, key_html(key), value_html(value), note)


def arguments_box(args: Any, previous: Previous | None, declared: tuple[str, ...] = ()) -> Markup:
    """`#waiting-args`: a line per key, and `#previous`: the comparison. The keys the tool declares
    (`declared`, its parameters) come first: any number of keys it does not take, written before
    the one it reads, cannot push that one out of sight. Otherwise the call's own order."""
    if not isinstance(args, dict):  # the loop stops only for an object; show anything else whole
        return html('<div class="args" id="waiting-args"><div class="arg">{}</div></div>', value_html(args))
    missing = object()
    before = previous.args if previous and isinstance(previous.args, dict) else None
    extra = [k for k in args if declared and k not in declared]
    ordered = [k for k in args if k not in extra] + extra
    rows = [_row(k, args[k], before.get(k, missing) if before is not None else missing, before is not None,
                 missing) for k in ordered]
    gone = [k for k in before or () if k not in args]
    rows += [html('<div class="arg changed gone" data-arg-gone="{}">{}: '
                  '<span class="was">removed; was {}</span></div>', k, key_html(k), value_html(before[k]))
             for k in gone]
    count = f"{len(args)} argument{'s' if len(args) != 1 else ''}"
    order = (f"the tool's parameters first, then {len(extra)} it does not declare" if extra
             else "in the order the model wrote them")
    folded = any(len(_json(x)) > FOLD_CHARS for pair in args.items() for x in pair)
    head = html('<div class="argshead">{}, {}{}</div>', count, order,
                "; long values folded, each with its size" if folded else "")
    return html('<div class="args" id="waiting-args">{}{}</div>{}', head, join(rows),
                _comparison(args, previous, before, gone))


def _comparison(args: dict[str, Any], previous: Previous | None, before: dict[str, Any] | None,
                gone: list[str]) -> Markup:
    if previous is None:
        return Markup("")
    if previous.args == args:
        return html('<p class="same" id="previous">This call is <b>identical to call <code>{}</code></b>, '
                    'which {}</p>', previous.call_id, previous.outcome)
    changed = sum(1 for k, v in args.items() if before is None or before.get(k, object()) != v) + len(gone)
    return html('<p id="previous">Compared with call <code>{}</code>, the previous call of this tool '
                '(which {}): {} highlighted.</p>', previous.call_id, previous.outcome,
                f"{changed} difference{'s' if changed != 1 else ''}")
