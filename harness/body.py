"""A chat request's body, encoded once per message.

A run resends its whole transcript every turn, and only its end is new: `Bodies` keeps each
message's JSON beside the message object it encoded, so a turn encodes what the turn added and
joins the rest as bytes. The bytes are exactly `json.dumps(body, ensure_ascii=False,
separators=(",", ":"), allow_nan=False)` in UTF-8 — what `httpx` sends for `json=body` — because
the C encoder writes an object as its members' encodings joined in order.

A message is known by identity, as the store's tracker knows a run's items: the loop only
appends to a transcript, and a message replaced by another object (an edited transcript, a
resumed run) is encoded again from there on. A message edited in place while its object is
kept is not seen; nothing in the harness does that.
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
        key = id(messages[0])
        objs, texts = self._kept.pop(key, ([], []))
        if objs and objs[0] is not messages[0]:  # another object at a reused id
            objs, texts = [], []
        same = 0
        for kept, now in zip(objs, messages, strict=False):
            if kept is not now:
                break
            same += 1
        del objs[same:], texts[same:]
        for message in messages[same:]:
            texts.append(encoded(message))  # before its object is kept: a failed encode keeps nothing
            objs.append(message)
        self._kept[key] = (objs, texts)
        while len(self._kept) > TRANSCRIPTS:
            self._kept.popitem(last=False)
        return texts

    def _tools_json(self, tools: Sequence[Any]) -> bytes:
        kept, text = self._tools
        if len(kept) != len(tools) or any(a is not b for a, b in zip(kept, tools, strict=True)):
            text = encoded(list(tools))
            self._tools = (list(tools), text)
        return text
