"""An upstream's reply, in the OpenAI and Anthropic wire formats, as a scenario-file reply
(Gemini's and Ollama's: `gemini_ollama`).

`reply_of(fmt, body)` reads a whole JSON reply; a `Stream` reads an SSE reply as its bytes
arrive, beside the relay that passes the same bytes on. Both return a scenario reply,
`{"content": ...}`, `{"tool_calls": [...]}` or both, or raise `NotRecordable` saying why the
reply cannot be recorded: a reply is never changed to make it fit, and nothing here may stop
the bytes reaching the client (a `Stream` that meets something odd stops reading, it does not
raise).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any, Literal

from mockprovider.reading.validation import MAX_DEPTH
from mockprovider.scripts.files import MAX_FILE_BYTES

Format = Literal["chat", "responses", "messages", "gemini", "ollama", "converse"]

MAX_REPLY_BYTES = MAX_FILE_BYTES
"""A reply larger than this is passed through but not recorded: a recording that holds it could
not be loaded with --scenarios, whose file limit this is."""
# A recorded reply may nest as deep as a request body may (`validation.MAX_DEPTH`): deeper is
# passed through, not recorded (parsing it would recurse, and replaying it could not be asked for).
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(rb"[^\[\]{}]+")


class NotRecordable(ValueError):
    """Why a reply that reached the client stays out of the recording (one log line)."""


def check_depth(raw: bytes) -> None:
    """`NotRecordable` when `raw` nests deeper than `MAX_DEPTH`, found without recursing."""
    brackets = _NOT_BRACKETS.sub(b"", _STRINGS.sub(b"", raw))
    if len(brackets) <= MAX_DEPTH:
        return
    deepest = max(accumulate(1 if c in b"[{" else -1 for c in brackets), default=0)
    if deepest > MAX_DEPTH:
        raise NotRecordable(f"the reply nests {deepest} levels deep (at most {MAX_DEPTH} are recorded)")


def loads(raw: bytes | str) -> Any:
    data = raw.encode() if isinstance(raw, str) else raw
    check_depth(data)
    try:
        return json.loads(data)
    except ValueError as e:
        raise NotRecordable(f"the reply is not JSON ({e})") from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def build(text: Any, calls: list[tuple[Any, Any, Any]]) -> dict[str, Any]:
    """A scenario reply from the text and (name, arguments, id) triples as they came; odd values
    (a numeric name, arguments neither a string nor an object) are refused, not converted."""
    if text is not None and not isinstance(text, str):
        raise NotRecordable(f"the reply's text is {_kind(text)}, not a string")
    reply: dict[str, Any] = {}
    out = []
    for i, (name, arguments, call_id) in enumerate(calls):
        if not isinstance(name, str) or not name:
            raise NotRecordable(f"tool call {i} has the name {json.dumps(name)[:40]}, not a non-empty string")
        if not isinstance(arguments, str | dict):
            raise NotRecordable(f"tool call {i} ({name}) has arguments of type {_kind(arguments)}")
        call: dict[str, Any] = {"name": name, "arguments": arguments}
        if call_id is not None:
            if not isinstance(call_id, str):
                raise NotRecordable(f"tool call {i} ({name}) has an id of type {_kind(call_id)}")
            if call_id:
                call["id"] = call_id
        out.append(call)
    if text or not out:
        reply["content"] = text or ""
    if out:
        reply["tool_calls"] = out
    return reply


def usage_of(value: Any) -> dict[str, int] | None:
    """The upstream's token counts as a scenario reply's `usage`, if it reported both: served on
    replay only when asked (`usage=recorded`); the default recounts with o200k_base."""
    if not isinstance(value, Mapping):
        return None
    counts = (value.get("prompt_tokens", value.get("input_tokens")),
              value.get("completion_tokens", value.get("output_tokens")))
    if not all(type(n) is int and n >= 0 for n in counts):
        return None
    # Anthropic's input_tokens leaves out what the cache read and wrote; the prompt holds all three.
    # (A chat usage that also names them, as some proxies add, counts them in prompt_tokens already.)
    names = () if "prompt_tokens" in value else ("cache_read_input_tokens", "cache_creation_input_tokens")
    cached = [value.get(k) for k in names]
    prompt = counts[0] + sum(n for n in cached if type(n) is int and n >= 0)
    return {"prompt_tokens": prompt, "completion_tokens": counts[1]}


def with_usage(reply: dict[str, Any], usage: dict[str, int] | None) -> dict[str, Any]:
    return reply | {"usage": usage} if usage else reply


def as_object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise NotRecordable(f"{what} is {_kind(value)}, not an object")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise NotRecordable(f"{what} is {_kind(value)}, not an array")
    return value


def chat_message(message: Any) -> dict[str, Any]:
    message = as_object(message, "choices[0].message")
    calls = []
    for i, call in enumerate(as_list(message.get("tool_calls"), "tool_calls")):
        fn = as_object(as_object(call, f"tool_calls[{i}]").get("function"), f"tool_calls[{i}].function")
        calls.append((fn.get("name"), fn.get("arguments", ""), call.get("id")))
    return build(message.get("content"), calls)


def responses_output(output: Any) -> dict[str, Any]:
    texts, calls = [], []
    for i, item in enumerate(as_list(output, "output")):
        item = as_object(item, f"output[{i}]")
        if item.get("type") == "message":
            for part in as_list(item.get("content"), f"output[{i}].content"):
                if isinstance(part, Mapping) and part.get("type") == "output_text":
                    texts.append(part.get("text"))
        elif item.get("type") == "function_call":
            calls.append((item.get("name"), item.get("arguments", ""), item.get("call_id")))
    if not all(isinstance(t, str) for t in texts):
        raise NotRecordable("an output_text part's text is not a string")
    return build("".join(texts) or None, calls)


def messages_content(content: Any) -> dict[str, Any]:
    texts, calls = [], []
    for i, block in enumerate(as_list(content, "content")):
        block = as_object(block, f"content[{i}]")
        if block.get("type") == "text":
            texts.append(block.get("text"))
        elif block.get("type") == "tool_use":
            calls.append((block.get("name"), block.get("input", {}), block.get("id")))
    if not all(isinstance(t, str) for t in texts):
        raise NotRecordable("a text block's text is not a string")
    return build("".join(texts) or None, calls)


def reply_of(fmt: Format, raw: bytes) -> dict[str, Any]:
    """A whole JSON reply of `fmt` as a scenario reply; `NotRecordable` otherwise."""
    body = as_object(loads(raw), "the reply")
    if body.get("type") == "error" or body.get("error") is not None:
        raise NotRecordable(f"the reply is an error: {json.dumps(body.get('error'))[:200]}")
    usage = usage_of(body.get("usage"))
    if fmt == "chat":
        choices = as_list(body.get("choices"), "choices")
        if not choices:
            raise NotRecordable("the reply has no choices")
        return with_usage(chat_message(as_object(choices[0], "choices[0]").get("message")), usage)
    # A reply without the array that holds its answer is not an empty answer.
    if fmt == "responses":
        return with_usage(responses_output(_required(body, "output")), usage)
    return with_usage(messages_content(_required(body, "content")), usage)


def _required(body: Mapping[str, Any], key: str) -> Any:
    if body.get(key) is None:
        raise NotRecordable(f"the reply has no {key}")
    return body[key]


# --- streams ------------------------------------------------------------------------------------


class Stream:
    """Reads one SSE reply as its bytes arrive; `reply()` once it has ended."""

    def __init__(self, fmt: Format) -> None:
        self.fmt = fmt
        self.finished = False
        """The stream said the reply is whole (a finish reason, `response.completed`,
        `message_stop`), whatever happens to the connection after."""
        self.problem: str | None = None
        """Why the reply will not be recorded, once something odd was met; reading then stops."""
        self.oversize = False
        self._size = 0
        self._pending = b""
        self._event = ""
        self._data: list[bytes] = []
        self._text: list[Any] = []
        self._calls: dict[Any, dict[str, list[Any]]] = {}
        self._whole: dict[str, Any] | None = None
        self._usage: dict[str, Any] = {}

    def feed(self, data: bytes) -> None:
        if self.problem is not None:
            return
        self._size += len(data)
        if self._size > MAX_REPLY_BYTES:
            self.oversize = True
            self._stop(f"the reply is larger than {MAX_REPLY_BYTES} bytes, the limit of a scenario file")
            return
        try:
            self._read(data)
        except NotRecordable as e:
            self._stop(str(e))
        except (ValueError, LookupError, TypeError, AttributeError) as e:
            # Valid SSE of an unexpected shape: the client gets it as it is; the recording skips it.
            self._stop(f"the stream holds what the recorder cannot read ({type(e).__name__}: {e})")

    def _read(self, data: bytes) -> None:
        """Read the next bytes of the stream: SSE, line by line (a format of other framing reads its own)."""
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def _stop(self, problem: str) -> None:
        self.problem = problem
        self._pending, self._data, self._text, self._calls = b"", [], [], {}

    def _line(self, line: bytes) -> None:
        if not line:
            if self._data:
                self._dispatch(self._event, b"\n".join(self._data))
            self._event, self._data = "", []
        elif line.startswith(b"event:"):
            self._event = line[6:].strip().decode("utf-8", "replace")
        elif line.startswith(b"data:"):
            self._data.append(line[5:].strip())

    def _dispatch(self, event: str, data: bytes) -> None:
        if data == b"[DONE]":
            return
        payload = loads(data)
        if not isinstance(payload, Mapping):
            return
        if event == "error" or payload.get("type") == "error" or payload.get("error") is not None:
            # A stream that ends in an error holds half a reply, however cleanly it closes.
            raise NotRecordable(f"the stream ended in an error: {json.dumps(payload.get('error'))[:200]}")
        if self.fmt == "chat":
            self._chat(payload)
        elif self.fmt == "responses":
            self._responses(event or str(payload.get("type", "")), payload)
        else:
            self._messages(event or str(payload.get("type", "")), payload)

    def _slot(self, key: Any) -> dict[str, list[Any]]:
        key = key if isinstance(key, int | str) else json.dumps(key)  # an odd index stays hashable
        return self._calls.setdefault(key, {"name": [], "arguments": [], "id": []})

    def _chat(self, chunk: Mapping[str, Any]) -> None:
        if isinstance(chunk.get("usage"), Mapping):
            self._usage = dict(chunk["usage"])
        choices = as_list(chunk.get("choices"), "choices")
        if not choices:
            return  # the usage chunk
        choice = as_object(choices[0], "choices[0]")
        self.finished = self.finished or bool(choice.get("finish_reason"))
        delta = as_object(choice.get("delta") or {}, "choices[0].delta")
        if delta.get("content") is not None:
            self._text.append(delta["content"])
        for part in as_list(delta.get("tool_calls"), "delta.tool_calls"):
            part = as_object(part, "a tool_calls part")
            slot = self._slot(part.get("index", 0))
            fn = as_object(part.get("function") or {}, "a tool call's function")
            pieces = (("name", fn.get("name")), ("arguments", fn.get("arguments")), ("id", part.get("id")))
            for key, value in pieces:
                if value is not None and value != "":
                    slot[key].append(value)

    def _responses(self, event: str, payload: Mapping[str, Any]) -> None:
        if event in ("response.completed", "response.incomplete"):
            response = as_object(payload.get("response"), "response")
            usage = usage_of(response.get("usage"))
            self._whole = with_usage(responses_output(response.get("output")), usage)
            self.finished = event == "response.completed"

    def _messages(self, event: str, payload: Mapping[str, Any]) -> None:
        if event == "message_stop":
            self.finished = True
        elif event in ("message_start", "message_delta"):
            # input_tokens come first, in message_start; output_tokens, cumulative, in each delta.
            usage = as_object(payload.get("message") or {}, "message").get("usage") or payload.get("usage")
            if isinstance(usage, Mapping):
                self._usage |= {k: v for k, v in usage.items() if v is not None}
        elif event == "content_block_start":
            block = as_object(payload.get("content_block"), "content_block")
            slot = self._slot(payload.get("index", 0))
            slot["type"] = [block.get("type")]
            if block.get("type") == "text" and block.get("text"):
                slot["arguments"].append(block["text"])
            elif block.get("type") == "tool_use":
                slot["name"].append(block.get("name"))
                slot["id"].append(block.get("id"))
                slot["input"] = [block.get("input", {})]
        elif event == "content_block_delta":
            delta = as_object(payload.get("delta"), "delta")
            slot = self._slot(payload.get("index", 0))
            piece = delta.get("text") if delta.get("type") == "text_delta" else delta.get("partial_json")
            if piece is not None:
                slot["arguments"].append(piece)

    def reply(self) -> dict[str, Any]:
        """The scenario reply the stream carried; `NotRecordable` if it cannot be recorded."""
        if self.problem is not None:
            raise NotRecordable(self.problem)
        if self.fmt == "responses":
            if self._whole is None:
                raise NotRecordable("the stream ended without response.completed")
            return self._whole
        if self.fmt == "messages":
            return self._messages_reply()
        if not self._text and not self._calls:
            raise NotRecordable("the stream held no reply")
        ordered = [self._calls[key] for key in sorted(self._calls, key=lambda k: (isinstance(k, str), k))]
        return with_usage(build(_joined(self._text, "text"), [
            (_joined(s["name"], "name"), _joined(s["arguments"], "arguments") or "", _joined(s["id"], "id"))
            for s in ordered
        ]), usage_of(self._usage))

    def _messages_reply(self) -> dict[str, Any]:
        texts, calls = [], []
        for key in sorted(self._calls, key=lambda k: (isinstance(k, str), k)):
            slot = self._calls[key]
            if slot.get("type") == ["text"]:
                texts.append(_joined(slot["arguments"], "text") or "")
            elif slot.get("type") == ["tool_use"]:
                arguments = _joined(slot["arguments"], "partial_json")
                name, call_id = _joined(slot["name"], "name"), _joined(slot["id"], "id")
                calls.append((name, arguments or slot["input"][0], call_id))
        if not texts and not calls:
            raise NotRecordable("the stream held no content block")
        return with_usage(build("".join(texts) or None, calls), usage_of(self._usage))


def _joined(pieces: list[Any], what: str) -> Any:
    """String pieces joined; one piece of another type (an object of arguments) as it came."""
    if not pieces:
        return None
    if all(isinstance(p, str) for p in pieces):
        return "".join(pieces)
    if len(pieces) == 1:
        return pieces[0]
    raise NotRecordable(f"the {what} came in pieces of types {', '.join(sorted({_kind(p) for p in pieces}))}")
