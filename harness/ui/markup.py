"""HTML that is safe by construction: every value is escaped unless it is already `Markup`.

A page is built from `html("<p>{}</p>", value)` calls; `{}` slots escape their value, so a
string a provider, a tool, a file or a run id controls can only ever become text. How a slot
is escaped depends on where it stands in the template:

- **In text**, escaping also makes invisible characters visible: C0/C1 controls, zero-width
  characters and the bidirectional marks, overrides and isolates (U+061C, U+202A–U+202E,
  U+2066–U+2069), the characters that hide text (tag characters, variation selectors,
  fillers) and halves of surrogate pairs render as `\\u202e` in a marked span, so a tool call
  cannot reorder what the person reads before approving it. Newlines and tabs stay
  (transcripts are shown preformatted).
- **Inside an attribute value** (`<input value="{}">`), the value is kept exactly (quotes and
  `&<>` escaped): markup there would end the attribute, and a form must post back what the
  run holds. Only surrogate halves, which no page can carry, become U+FFFD.
"""

from __future__ import annotations

import functools
import html as _html
import json
import re
from collections.abc import Iterable
from typing import Any

_INVISIBLE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    r"\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ud800-\udfff\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    r"\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
"""Controls, bidi marks, and the characters that draw nothing yet carry text: soft hyphen,
fillers, variation selectors and tag characters (both can smuggle a whole hidden message)."""
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class Markup(str):
    """A string that is already HTML: slots take it as it is."""

    __slots__ = ()


def _visible(m: re.Match[str]) -> str:
    return f'<span class="ctl" title="invisible character">\\u{ord(m.group()):04x}</span>'


def escape(value: object) -> Markup:
    """`value` as HTML text: `<>&"'` escaped, invisible characters shown as escapes."""
    if isinstance(value, Markup):
        return value
    return Markup(_INVISIBLE.sub(_visible, _html.escape(str(value), quote=True)))


def escape_attribute(value: object) -> Markup:
    """`value` inside a quoted attribute: exactly the value (`<>&"'` escaped)."""
    if isinstance(value, Markup):
        return value
    return Markup(_SURROGATE.sub("\ufffd", _html.escape(str(value), quote=True)))


@functools.lru_cache(maxsize=1024)
def _in_attribute(template: str) -> tuple[bool, ...]:
    """For each `{}` slot of `template`: whether it stands inside a tag (an attribute value)
    rather than in text. Templates are ours, so a small scan of `<`, `>` and quotes suffices."""
    slots, in_tag, quote = [], False, ""
    pieces = template.split("{}")
    for piece in pieces[:-1]:
        for ch in piece:
            if quote:
                quote = "" if ch == quote else quote
            elif in_tag:
                if ch in "\"'":
                    quote = ch
                elif ch == ">":
                    in_tag = False
            elif ch == "<":
                in_tag = True
        slots.append(in_tag)
    return tuple(slots)


def html(template: str, *values: object) -> Markup:
    """`template` (trusted, ours) with each `{}` slot filled by a value escaped for its place."""
    where = _in_attribute(template)
    return Markup(template.format(*(escape_attribute(v) if attr else escape(v)
                                    for v, attr in zip(values, where, strict=True))))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    return Markup(sep.join(escape(p) for p in parts))


def pretty(value: Any) -> str:
    """A JSON value (or a JSON string) indented for reading; other text unchanged."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
