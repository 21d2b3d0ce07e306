"""A chat request's body, encoded once per message.

A run resends its whole transcript every turn, and only its end is new: `Bodies` keeps each
message's JSON beside a copy of the message it encoded, so a turn encodes what the turn added
and joins the rest as bytes. The bytes are exactly `json.dumps(body, ensure_ascii=False,
separators=(",", ":"), allow_nan=False)` in UTF-8 — what `httpx` sends for `json=body` — because
the C encoder writes an object as its members' encodings joined in order.

A kept encoding is reused only while the message still equals its copy (one comparison in C
per turn, far cheaper than encoding): a message edited in place, however deep, a transcript
edited, shortened or forked, is encoded again from its first difference. The copy has
containers of its own and shares the strings; a number or boolean in it equals only a value
of its own type (`True` is not `1`, `1` is not `1.0`: they are different JSON). An object whose
members were reordered, with equal values, is sent in its first order: the same JSON.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

TRANSCRIPTS = 4
"""Transcripts kept at once (runs sharing one client); the least recently sent is dropped."""


def encoded(value: Any) -> bytes:
    return _ENCODE(value).encode("utf-8")


class _Exact:
    """A number or boolean in a copy: equal only to the same value of the same type."""

    __slots__ = ("value",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self.value) and other == self.value


class _Unlike:
    """The copy of a message too deep to copy (the encoder goes deeper than Python's recursion):
    equal to nothing, so the message is encoded every time, as it was before it was kept."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return False


def copied(value: Any) -> Any:
    """`value` with containers of its own, to compare the value with later (see the top)."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, dict):
        return {k: copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copied(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copied(v) for v in value)
    return _Exact(value)


def _kept_copy(value: Any) -> Any:
    try:
        return copied(value)
    except RecursionError:
        return _Unlike()


class Bodies:
    """Request bodies for one client; each transcript is keyed by its first message object."""

    def __init__(self) -> None:
        self._kept: OrderedDict[int, tuple[list[Any], list[bytes]]] = OrderedDict()
        self._tools: tuple[list[Any], bytes] = ([], b"")

    def clear(self) -> None:
        self._kept.clear()
        self._tools = ([], b"")

    def body(self, model: str, messages: Sequence[Any], tools: Sequence[Any] | None,
             max_tokens: int | None) -> bytes:
        parts = [b'{"model":', encoded(model), b',"messages":[', b",".join(self._messages(messages)), b"]"]
        if tools:
            parts += [b',"tools":', self._tools_json(tools)]
        if max_tokens is not None:
            parts += [b',"max_tokens":', encoded(max_tokens)]
        parts.append(b"}")
        return b"".join(parts)

    def _messages(self, messages: Sequence[Any]) -> list[bytes]:
        if not messages:
            return []
        key = id(messages[0])  # a reused id is harmless: the copies decide
        copies, texts = self._kept.pop(key, ([], []))
        same = min(len(copies), len(messages))
        if copies[:same] != list(messages[:same]):  # the copy on the left: `_Exact` decides
            same = next(i for i in range(same) if copies[i] != messages[i])
        del copies[same:], texts[same:]
        for message in messages[same:]:
            texts.append(encoded(message))  # before its copy is kept: a failed encode keeps nothing
            copies.append(_kept_copy(message))
        self._kept[key] = (copies, texts)
        while len(self._kept) > TRANSCRIPTS:
            self._kept.popitem(last=False)
        return texts

    def _tools_json(self, tools: Sequence[Any]) -> bytes:
        kept, text = self._tools
        if kept != list(tools):
            text = encoded(list(tools))
            self._tools = (_kept_copy(list(tools)), text)
        return text
