"""Large requests off the server's event loop: a request whose body is over `offload.LARGE_BYTES`
is served whole (read, parsed, translated, counted, rendered) on a worker thread's own loop.

A body of 100,000 content blocks or tool results takes seconds of Python to read; on the server's
loop it would hold every other client's reply, `/healthz` included, all that time. On the worker's
loop it shares the interpreter with the server's in turns of `sys.getswitchinterval()`, so the
server's loop goes on answering meanwhile. Small requests (nearly all of them) stay on the loop:
the hop between threads would cost more than their work.

The request keeps what it had on the server's loop: its scope (per-request state), its context
variables (copied when it is handed over), and its `receive` and `send`, which run on the
server's loop (so a client that leaves is seen, and a stream is sent, as there). What would still
hold the interpreter for long stretches of C is taken apart: the parse lets other threads in
between objects (`offload.parse_yielding`), and while a large request is served the collector's
full passes wait (each would walk its millions of new objects in one go; the young generations
are still collected, and the full pass comes once the request's objects are gone).
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mockprovider.offload import LARGE_BYTES
from mockprovider.reading.request_headers import HEADERS, declared_length

_Call = Callable[..., Awaitable[Any]]


class _Worker:
    """One daemon thread running an event loop, started on first use, shared by the process."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mock-large-bodies", daemon=True).start()
                self._loop = loop
            return self._loop


class _FullCollectionsWait:
    """While any large request is served, the oldest generation's threshold is out of reach."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serving = 0
        self._saved = gc.get_threshold()

    def __enter__(self) -> None:
        with self._lock:
            if not self._serving:
                self._saved = gc.get_threshold()
                gc.set_threshold(self._saved[0], self._saved[1], 2**31 - 1)
            self._serving += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._serving -= 1
            if not self._serving:
                gc.set_threshold(*self._saved)


_WORKER = _Worker()
FULL_COLLECTIONS_WAIT = _FullCollectionsWait()
"""`with FULL_COLLECTIONS_WAIT:` while a large body is served (also by `/mcp`, on the loop)."""


def declared_large(scope: Scope, *, keep: bool = False) -> bool | None:
    """Whether the request's declared body is over LARGE_BYTES; None when it declares no length
    (chunked: `large` reads that far to know). No coroutine: nearly every request ends here.
    `keep`: the headers' dict kept for every later step (`request_headers.HEADERS`), for a request
    no middleware sees before them; its first `content-length` counts, as in the headers' list."""
    headers = scope.get(HEADERS)
    if headers is None:
        headers = dict(reversed(scope["headers"]))
        if keep:
            scope[HEADERS] = headers
    value = headers.get(b"content-length")
    if value is not None:
        # `declared_length`'s short case written in: its folder is not visited per request
        # (tests/mockprovider/test_request_path.py).
        length = (int(value) if len(value) < 20 else declared_length(value) or 0) if value.isdigit() else 0
        return length > LARGE_BYTES
    return None if b"transfer-encoding" in headers else False


async def large(scope: Scope, receive: Receive) -> tuple[bool, Receive]:
    """Whether the request's body is over LARGE_BYTES, and the `receive` that reads it: its own,
    unless the body came in chunks of unknown total, read here that far (then the `receive`
    gives the messages read first, and the rest after them)."""
    if (declared := declared_large(scope)) is not None:
        return declared, receive
    read: list[Message] = []
    size, more = 0, True
    while more and size <= LARGE_BYTES:
        message = await receive()
        read.append(message)
        size += len(message.get("body", b""))
        more = message["type"] == "http.request" and message.get("more_body", False)

    async def replay() -> Message:
        return read.pop(0) if read else await receive()

    return size > LARGE_BYTES, replay


def _on(loop: asyncio.AbstractEventLoop, call: _Call) -> _Call:
    """`call`, run on `loop` whichever loop awaits it (cancelled there when the awaiter is)."""

    async def hop(*args: Any) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call(*args), loop))

    return hop


async def serve(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """`app(scope, receive, send)` on the worker's loop; its `receive` and `send` on this one."""
    here = asyncio.get_running_loop()
    with FULL_COLLECTIONS_WAIT:
        # Scheduled from this thread, so the request runs in a copy of this task's context.
        request = app(scope, _on(here, receive), _on(here, send))
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(request, _WORKER.loop()))
