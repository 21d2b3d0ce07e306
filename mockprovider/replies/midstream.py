"""Faults inside a reply: the API's own error event mid-stream, or a connection dropped mid-body.

A `stream_error` fault sends `after_events` events of the stream (or what `after_ms` lets
through), then the error event the real API sends mid-stream, and ends the stream cleanly:

- Chat Completions: a `data:` line holding `{"error": {...}}`, and no `[DONE]`;
- Responses: `response.failed`, its response `failed` with `error.code` `server_error` (never
  before `response.created`, which opens every Responses stream);
- Messages: `event: error` with an `overloaded_error`;
- Gemini: an element holding `{"error": {...}}` (a `data:` line with `alt=sse`);
- Ollama: an NDJSON line holding `{"error": "…"}`.

A `drop` fault sends as much, then closes the connection without finishing the body (the
server logs that the reply was left incomplete): a client sees a broken chunked body. A reply
that is not streamed is dropped halfway through its bytes, under a `content-length` promising
all of them. With `after_ms`, the cut comes at the first event boundary at or after that many
milliseconds; a reply that would end sooner holds its last event until then. Either way the
last event (`[DONE]`, `response.completed`, `message_stop`) is never sent: a fault whose N is
past the stream's length takes its place.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable

from starlette.responses import StreamingResponse
from starlette.types import Send

from mockprovider.scripts.options import Fault

Events = AsyncIterator[bytes] | Iterable[bytes]
ErrorEvent = Callable[[int], bytes]
"""The format's mid-stream error event, given how many events came before it."""


def applies(fault: Fault | None, stream: bool) -> bool:
    """Whether the route answers `fault` inside its reply (else: an error reply instead)."""
    return fault is not None and (fault.kind == "drop" or (fault.kind == "stream_error" and stream))


async def _items(events: Events) -> AsyncIterator[bytes]:
    if isinstance(events, AsyncIterator):
        async for e in events:
            yield e
    else:
        for e in events:
            yield e


async def cut(
    events: Events, fault: Fault, error: ErrorEvent
) -> AsyncIterator[bytes]:
    """`events` up to the fault, then the error event (stream_error) or nothing more (drop)."""
    loop = asyncio.get_running_loop()
    deadline = None if fault.after_ms is None else loop.time() + fault.after_ms / 1000
    items = _items(events)
    sent, pending = 0, await anext(items, None)
    while pending is not None:
        following = await anext(items, None)
        if deadline is not None:
            if following is None:  # the last event waits for the cut, and is never sent
                # (the loop's timer may fire before its clock reads the deadline)
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                break
            if loop.time() >= deadline:
                break
        elif sent >= fault.after_events or following is None:
            break  # never past the last event: a fault always cuts the reply short
        yield pending
        sent, pending = sent + 1, following
    if fault.kind == "stream_error":
        yield error(sent)


class _Unfinished(StreamingResponse):
    """A streamed reply whose body is never finished: the server closes the connection."""

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})


def stream(
    events: Events, fault: Fault, error: ErrorEvent, media_type: str = "text/event-stream"
) -> StreamingResponse:
    """A streamed reply (SSE unless `media_type` says otherwise) carrying `fault`."""
    kind = _Unfinished if fault.kind == "drop" else StreamingResponse
    body = cut(events, fault, error)
    return kind(body, media_type=media_type, headers={"cache-control": "no-cache"})


async def _half(body: bytes, fault: Fault) -> AsyncIterator[bytes]:
    if fault.after_ms is not None:
        await asyncio.sleep(fault.after_ms / 1000)
    yield body[: len(body) // 2]


def dropped_body(body: bytes, fault: Fault) -> StreamingResponse:
    """A JSON reply cut halfway, its `content-length` still promising the whole body."""
    return _Unfinished(
        _half(body, fault), media_type="application/json",
        headers={"content-length": str(len(body))},
    )
