"""Google's and Ollama's replies, whole or streamed, as scenario replies.

Gemini answers with candidates whose parts are text or a `functionCall` (`name`, `args`, an `id`
when it gives one) and counts tokens in `usageMetadata`; its stream is the same object once per
SSE `data:` line (`alt=sse`) or one JSON array of them, the last with a `finishReason`. Ollama
answers with one `message` (`content`, `tool_calls` with an `arguments` object) and counts in
`prompt_eval_count` and `eval_count`; its stream is one such object per line, the last `done`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mockprovider.recorder.replies import NotRecordable, Stream, as_list, as_object, build, loads, with_usage


def _usage(prompt: Any, completion: Any) -> dict[str, int] | None:
    if type(prompt) is int and type(completion) is int and prompt >= 0 and completion >= 0:
        return {"prompt_tokens": prompt, "completion_tokens": completion}
    return None


def _check_error(chunk: Mapping[str, Any]) -> None:
    if chunk.get("error") is not None:
        raise NotRecordable(f"the reply is an error: {json.dumps(chunk.get('error'))[:200]}")


class _Reading:
    """A reply's text pieces and calls, as its chunks come."""

    def __init__(self) -> None:
        self.texts: list[Any] = []
        self.calls: list[tuple[Any, Any, Any]] = []
        """(name, arguments, id) as they came."""
        self.finished = False
        self.usage: dict[str, int] | None = None

    def built(self) -> dict[str, Any]:
        if not all(isinstance(t, str) for t in self.texts):
            raise NotRecordable("a text piece of the reply is not a string")
        return with_usage(build("".join(self.texts) or None, self.calls), self.usage)


class GeminiReply(_Reading):
    """Gemini's chunks, fed one by one (a whole reply is one chunk)."""

    def feed(self, chunk: Any) -> None:
        chunk = as_object(chunk, "a Gemini reply")
        _check_error(chunk)
        metadata = chunk.get("usageMetadata")
        if isinstance(metadata, Mapping):
            self.usage = _usage(metadata.get("promptTokenCount", 0), metadata.get("candidatesTokenCount", 0))
        candidates = as_list(chunk.get("candidates"), "candidates")
        if not candidates:
            return
        candidate = as_object(candidates[0], "candidates[0]")
        self.finished = self.finished or bool(candidate.get("finishReason"))
        content = as_object(candidate.get("content") or {}, "candidates[0].content")
        for i, part in enumerate(as_list(content.get("parts"), "candidates[0].content.parts")):
            part = as_object(part, f"parts[{i}]")
            if part.get("thought"):
                continue  # a thought summary is reasoning, not the reply
            if "text" in part:
                self.texts.append(part["text"])
            elif "functionCall" in part:
                call = as_object(part["functionCall"], f"parts[{i}].functionCall")
                self.calls.append((call.get("name"), call.get("args", {}), call.get("id")))

    def reply(self) -> dict[str, Any]:
        if not self.texts and not self.calls:
            raise NotRecordable("the reply held no parts")
        return self.built()


class OllamaReply(_Reading):
    """Ollama's objects, fed one by one (a whole reply is one object)."""

    def feed(self, chunk: Any) -> None:
        chunk = as_object(chunk, "an Ollama reply")
        _check_error(chunk)
        message = as_object(chunk.get("message") or {}, "message")
        if message.get("content"):
            self.texts.append(message["content"])
        for i, call in enumerate(as_list(message.get("tool_calls"), "message.tool_calls")):
            call = as_object(call, f"tool_calls[{i}]")
            fn = as_object(call.get("function"), f"tool_calls[{i}].function")
            self.calls.append((fn.get("name"), fn.get("arguments", {}), call.get("id")))
        if chunk.get("done") is True:
            self.finished = True
            self.usage = _usage(chunk.get("prompt_eval_count"), chunk.get("eval_count"))

    def reply(self) -> dict[str, Any]:
        if not self.finished:
            raise NotRecordable("the reply never said it was done")
        return self.built()


def gemini_reply(raw: bytes) -> dict[str, Any]:
    """A whole Gemini reply: one object, or a stream sent as one JSON array of them."""
    body = loads(raw)
    reading = GeminiReply()
    for chunk in body if isinstance(body, list) else [body]:
        reading.feed(chunk)
    return reading.reply()


def ollama_reply(raw: bytes) -> dict[str, Any]:
    """A whole Ollama reply: one object, or a stream's lines read at once."""
    reading = OllamaReply()
    for line in raw.splitlines():
        if line.strip():
            reading.feed(loads(line))
    return reading.reply()


class GeminiStream(Stream):
    """Gemini's SSE stream (`alt=sse`): one reply chunk per `data:` line."""

    def __init__(self) -> None:
        super().__init__("gemini")
        self._reading = GeminiReply()

    def _dispatch(self, event: str, data: bytes) -> None:
        self._reading.feed(loads(data))
        self.finished = self._reading.finished

    def reply(self) -> dict[str, Any]:
        if self.problem is not None:
            raise NotRecordable(self.problem)
        return self._reading.reply()


class OllamaStream(Stream):
    """Ollama's stream: one reply object per line (`application/x-ndjson`)."""

    def __init__(self) -> None:
        super().__init__("ollama")
        self._reading = OllamaReply()

    def _line(self, line: bytes) -> None:
        if line.strip():
            self._reading.feed(loads(line))
            self.finished = self._reading.finished

    def reply(self) -> dict[str, Any]:
        if self.problem is None and self._pending.strip():  # a last line without its newline
            self.feed(b"\n")
        if self.problem is not None:
            raise NotRecordable(self.problem)
        return self._reading.reply()
