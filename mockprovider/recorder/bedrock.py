"""Bedrock's Converse replies, whole or streamed, as scenario replies.

A whole reply holds `output.message.content`: `text` blocks and `toolUse` blocks (`toolUseId`,
`name`, an `input` object); `usage` counts `inputTokens` (less what the cache read and wrote,
given apart) and `outputTokens`. A stream is AWS's binary event stream: per block, text pieces or
a toolUse's start and its input's JSON in pieces, then `messageStop` and `metadata` with the
usage; an exception message in it (a `modelStreamErrorException`) means half a reply, never
recorded. Reasoning blocks are the model's, not the reply's, and are left out, as Gemini's
thoughts are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mockprovider.apis import bedrock_eventstream as frames
from mockprovider.recorder.replies import (
    NotRecordable,
    Stream,
    as_list,
    as_object,
    build,
    loads,
    with_usage,
)


def usage_of(value: Any) -> dict[str, int] | None:
    """Bedrock's usage as a scenario reply's: the prompt holds the cache's reads and writes."""
    if not isinstance(value, Mapping):
        return None
    counts = [value.get(k, 0) for k in ("inputTokens", "outputTokens", "cacheReadInputTokens",
                                         "cacheWriteInputTokens")]
    if not all(type(n) is int and n >= 0 for n in counts) or "outputTokens" not in value:
        return None
    return {"prompt_tokens": counts[0] + counts[2] + counts[3], "completion_tokens": counts[1]}


def converse_reply(raw: bytes) -> dict[str, Any]:
    """A whole Converse reply as a scenario reply; `NotRecordable` otherwise."""
    body = as_object(loads(raw), "the reply")
    if "message" in body and "output" not in body:
        raise NotRecordable(f"the reply is an error: {str(body.get('message'))[:200]}")
    message = as_object(as_object(body.get("output"), "output").get("message"), "output.message")
    texts, calls = [], []
    for i, block in enumerate(as_list(message.get("content"), "output.message.content")):
        block = as_object(block, f"content[{i}]")
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            use = as_object(block["toolUse"], f"content[{i}].toolUse")
            calls.append((use.get("name"), use.get("input", {}), use.get("toolUseId")))
    if not all(isinstance(t, str) for t in texts):
        raise NotRecordable("a text block's text is not a string")
    return with_usage(build("".join(texts) or None, calls), usage_of(body.get("usage")))


class ConverseStream(Stream):
    """A converse-stream reply read frame by frame as its bytes arrive (`Stream.feed`: never
    raising, a frame it cannot read stops the reading, not the relay)."""

    def __init__(self) -> None:
        super().__init__("converse")
        self._buffer = bytearray()
        self._blocks: dict[int, dict[str, Any]] = {}
        self._stream_usage: dict[str, int] | None = None

    def _read(self, data: bytes) -> None:
        self._buffer += data
        try:
            found = frames.read(self._buffer)
        except frames.Malformed as e:
            raise NotRecordable(f"the event stream is malformed ({e})") from None
        for headers, payload in found:
            self._frame(headers, payload)

    def _stop(self, problem: str) -> None:
        super()._stop(problem)
        self._buffer, self._blocks = bytearray(), {}

    def _frame(self, headers: Mapping[str, Any], payload: bytes) -> None:
        if headers.get(":message-type") != "event":
            kind = headers.get(":exception-type") or headers.get(":error-code")
            raise NotRecordable(f"the stream ended in an exception: {kind} {payload[:200]!r}")
        kind, data = headers.get(":event-type"), as_object(loads(payload), "an event")
        if kind == "contentBlockStart":
            start = as_object(as_object(data.get("start"), "start").get("toolUse"), "start.toolUse")
            self._block(data)["call"] = (start.get("name"), start.get("toolUseId"))
        elif kind == "contentBlockDelta":
            delta = as_object(data.get("delta"), "delta")
            block = self._block(data)
            if "text" in delta:
                block.setdefault("text", []).append(delta["text"])
            elif "toolUse" in delta:
                piece = as_object(delta["toolUse"], "delta.toolUse").get("input")
                block.setdefault("input", []).append(piece)
        elif kind == "messageStop":
            self.finished = True
        elif kind == "metadata":
            self._stream_usage = usage_of(data.get("usage"))

    def _block(self, data: Mapping[str, Any]) -> dict[str, Any]:
        index = data.get("contentBlockIndex")
        if type(index) is not int:
            raise NotRecordable(f"a block's contentBlockIndex is {index!r}")
        return self._blocks.setdefault(index, {})

    def reply(self) -> dict[str, Any]:
        if self.problem is not None:
            raise NotRecordable(self.problem)
        if not self.finished:
            raise NotRecordable("the stream ended without messageStop")
        texts, calls = [], []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            pieces = block.get("input", [])
            if not all(isinstance(p, str) for p in [*block.get("text", []), *pieces]):
                raise NotRecordable(f"block {index} came in pieces that are not strings")
            if "call" in block:
                name, call_id = block["call"]
                calls.append((name, "".join(pieces) or "{}", call_id))
            elif "text" in block:
                texts.append("".join(block["text"]))
        if not texts and not calls:
            raise NotRecordable("the stream held no reply")
        return with_usage(build("".join(texts) or None, calls), self._stream_usage)
