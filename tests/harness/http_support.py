"""A raw HTTP/1.1 server on a loopback port, on the test's own event loop, for replies no real
server would give (and to see the exact bytes a client sends)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

OK_BODY = (b'{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
           b'"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}')


def reply(body: bytes = OK_BODY, *, status: bytes = b"200 OK", headers: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n" + headers
            + b"content-length: %d\r\n\r\n" % len(body) + body)


OK = reply()


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request's bytes (head and Content-Length body); None at EOF before any."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + await reader.readexactly(length)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]
"""Serves one connection; the int counts connections from 0."""


@dataclass
class Raw:
    port: int
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def answering(*replies: bytes | None, close_after: bool = False) -> Callable[[Raw], Handler]:
    """A handler that gives each request the next of `replies` (on any connection); None closes
    the connection without a reply; `close_after` closes it after each reply."""
    queue = list(replies)

    def make(raw: Raw) -> Handler:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            while (request := await read_request(reader)) is not None:
                raw.requests.append(request)
                out = queue.pop(0)
                if out is None:
                    return
                writer.write(out)
                await writer.drain()
                if close_after:
                    return
        return handle
    return make


@contextlib.asynccontextmanager
async def raw_server(make: Callable[[Raw], Handler], *,
                     receive_buffer: int | None = None) -> AsyncIterator[Raw]:
    """Serves on 127.0.0.1; `receive_buffer` sets its connections' SO_RCVBUF (small: a server that
    reads nothing soon takes nothing)."""
    tasks: set[asyncio.Task[None]] = set()
    raw = Raw(port=0)
    handle = make(raw)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n, raw.connections = raw.connections, raw.connections + 1
        tasks.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await handle(reader, writer, n)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # cancelled: the test is over (ending quietly keeps asyncio from logging it)
        finally:
            writer.close()

    listener = socket.socket()
    if receive_buffer is not None:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # inherited on accept
    listener.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(serve, sock=listener)
    raw.port = listener.getsockname()[1]
    try:
        yield raw
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
