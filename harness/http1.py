"""HTTP/1.1 to one plain-http origin over asyncio: the model client's keep-alive connections.

`ModelClient` sends a plain-http provider's requests here when httpx's own machinery has nothing
to do for them (no TLS, no proxy, no credentials in the URL, no cookie, its request log off):
httpcore's pool, h11's state machine and anyio's streams cost more per request than a loopback
turn's bytes take to cross. What is left is what one POST and its reply need: a connection per
request in flight, kept while the server keeps it alive (at most `MAX_IDLE` idle, each for at
most `IDLE_EXPIRY_S`, `MAX_CONNECTIONS` at once: httpx's default limits), the reply parsed by
httptools (llhttp) and handed back as the `httpx.Response` httpx would have built.

Failures are httpx's own exception types, so the caller handles them as it handles httpx's:
`ConnectError` / `ConnectTimeout`, `WriteTimeout` (the server took no byte for `write` s),
`ReadTimeout` (no byte of the reply for `read` s), `PoolTimeout`, `ReadError` (a reset) and
`RemoteProtocolError` (closed before the reply ended, or not HTTP/1.1).

A request is never sent twice here. A connection the server closed while idle is dropped when
next picked (asyncio saw its EOF), or once idle past `IDLE_EXPIRY_S`, as httpcore's pool does;
one that dies in the race between the server closing it and a request being written fails as
it does under httpx ("Server disconnected without sending a response."), and the caller's retry
decides, under a new attempt number: a POST to a model is not idempotent (the provider may have
read it, and billed it), and a provider's faults keyed on the attempt must see every request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httptools
import httpx

MAX_CONNECTIONS = 100
MAX_IDLE = 20
IDLE_EXPIRY_S = 5.0
MAX_HEAD_BYTES = 100 * 1024
"""A reply's status line and headers may not take more (httpcore's bound on h11's buffer)."""
_NO_REPLY = "Server disconnected without sending a response."


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request at a time, its reply read by the parser's callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.dead = False
        """Closed, reset, or past trusting (bytes nobody asked for): never reused."""
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._reply: asyncio.Future[httpx.Response] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._limits: tuple[float | None, float | None] = (None, None)
        self._paused = False
        self._last = 0.0
        self._answered = False
        """Whether any byte of the reply to the request in flight has come."""
        self._begin()

    def _begin(self) -> None:
        self._reason: list[bytes] = []
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._head_done = False
        self._interim = False
        self._encoded = self._framed = False
        self._head_bytes = 0
        """Bytes received since this reply (or a 1xx reply before it) began: its head's bound."""
        self._head_size = 0
        """The head's bytes as parsed: a head may end in the chunk that takes it past the bound."""

    async def exchange(self, data: bytes, read_s: float | None, write_s: float | None) -> httpx.Response:
        if self.dead:
            raise httpx.RemoteProtocolError(_NO_REPLY)
        assert self.transport is not None
        self._begin()
        self._answered = False
        self._reply = reply = self.loop.create_future()
        self._limits, self._last = (read_s, write_s), self.loop.time()
        self.transport.write(data)
        if self._timer is None:  # one left armed by an earlier request looks again when it fires
            self._watch()
        try:
            return await reply
        finally:
            self._reply = None
            self._body, self._headers, self._reason = [], [], []

    def close(self) -> None:
        self.dead = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None and not self.loop.is_closed():
            self.transport.abort()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._reply is None or self._reply.done():
            self.close()  # the server spoke out of turn: what the connection holds is unknown
            return
        self._last = self.loop.time()
        self._answered = True
        self._head_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(httpx.RemoteProtocolError(f"malformed reply: {e}"))
            return
        if not self._head_done and self._head_bytes > MAX_HEAD_BYTES:
            self._fail(httpx.RemoteProtocolError(f"the reply's head is over {MAX_HEAD_BYTES} bytes"))

    def eof_received(self) -> None:
        return None  # the transport closes; connection_lost says what that means for the reply

    def connection_lost(self, exc: Exception | None) -> None:
        self.dead = True
        if self._reply is None or self._reply.done():
            return
        if exc is not None:  # a reset: even a body that runs until the close did not end well
            self._fail(httpx.ReadError(str(exc) or type(exc).__name__))
        elif self._head_done and not self._framed:
            self._finish(keep=False)  # a body that runs until the connection closes, closed
        elif not self._answered:
            self._fail(httpx.RemoteProtocolError(_NO_REPLY))
        else:
            self._fail(httpx.RemoteProtocolError("Server disconnected before the reply ended"))

    def pause_writing(self) -> None:
        self._paused, self._last = True, self.loop.time()
        self._rewatch()

    def resume_writing(self) -> None:
        self._paused, self._last = False, self.loop.time()
        self._rewatch()

    # httptools' callbacks

    def on_message_begin(self) -> None:
        if self._reply is None or self._reply.done():
            self.close()  # a reply after the one asked for (a 408 before closing): retire it

    def on_status(self, reason: bytes) -> None:
        self._reason.append(reason)
        self._bound_head(len(reason))

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._head_done:  # after it: a chunked body's trailers, which httpx drops too
            self._headers.append((name, value))
            self._bound_head(len(name) + len(value) + 4)

    def _bound_head(self, size: int) -> None:
        self._head_size += size
        if self._head_size > MAX_HEAD_BYTES:
            self._fail(httpx.RemoteProtocolError(f"the reply's head is over {MAX_HEAD_BYTES} bytes"))
            raise httptools.HttpParserError("head too long")  # stops the parser; the reply has failed

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status == 101:
            raise httptools.HttpParserError("101 Switching Protocols to a request that asked for no upgrade")
        self._interim = status < 200
        self._head_done = not self._interim
        names = {name.lower() for name, _ in self._headers}
        self._encoded = b"content-encoding" in names
        self._framed = status in (204, 304) or bool(names & {b"content-length", b"transfer-encoding"})
        """Whether the reply says where its body ends (else it ends when the connection closes)."""

    def on_body(self, chunk: bytes) -> None:
        self._body.append(chunk)

    def on_message_complete(self) -> None:
        if self._interim:  # 100 Continue, 103 Early Hints: the reply proper follows
            self._begin()
            return
        self._finish(keep=self._parser.should_keep_alive() and self._parser.get_http_version() == "1.1")

    # the reply

    def _finish(self, *, keep: bool) -> None:
        if not keep:
            self.close()
        assert self._reply is not None
        if self._reply.done():  # bytes after the reply ended: not a connection to reuse
            self.close()
            return
        version = self._parser.get_http_version()
        extensions = {"http_version": b"HTTP/" + version.encode(), "reason_phrase": b"".join(self._reason)}
        try:
            # httpx decodes a Content-Encoding it advertised (gzip, deflate…) as it reads the stream.
            body = b"".join(self._body)
            response = httpx.Response(self._parser.get_status_code(), headers=self._headers,
                                      stream=httpx.ByteStream(body), extensions=extensions)
            if self._encoded:
                response.read()  # httpx's decoders (gzip, deflate…: it asked for them), as it reads
            else:  # what `read()` leaves, without its decoder and chunker for the identity
                response._content, response.is_stream_consumed, response.is_closed = body, True, True
        except httpx.DecodingError as e:
            self._reply.set_exception(e)
            return
        self._reply.set_result(response)

    def _fail(self, error: Exception) -> None:
        self.close()
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(error)

    def _watch(self) -> None:
        """Fail the reply once no byte has moved for the limit of the direction it waits on. The
        timer is not cancelled when a reply ends (the next request reuses it), so it may fire early."""
        self._timer = None
        if self._reply is None or self._reply.done():
            return
        read_s, write_s = self._limits
        limit = write_s if self._paused else read_s
        if limit is None:
            return  # pause_writing / resume_writing look again
        due = self._last + limit
        if self.loop.time() < due:
            self._timer = self.loop.call_at(due, self._watch)
        elif self._paused:
            self._fail(httpx.WriteTimeout(f"the server took no byte of the request for {limit:g} s"))
        else:
            self._fail(httpx.ReadTimeout(f"no byte of the reply for {limit:g} s"))

    def _rewatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._watch()


class Origin:
    """Keep-alive HTTP/1.1 connections to `host:port`, shared by concurrent requests (each takes
    its own); `timeout` is httpx's `Timeout.as_dict()`."""

    def __init__(self, host: str, port: int, timeout: Mapping[str, float | None]) -> None:
        self.host, self.port = host, port
        self._connect_s, self._read_s = timeout["connect"], timeout["read"]
        self._write_s, self._pool_s = timeout["write"], timeout["pool"]
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def post(self, head: bytes, body: bytes) -> httpx.Response:
        """Send `head` (request line and headers, as they go on the wire) and `body`; the whole reply."""
        loop = asyncio.get_running_loop()
        if self._slots_loop is not loop:  # an asyncio.Semaphore binds to the first loop it waits on
            self._slots, self._slots_loop = asyncio.Semaphore(MAX_CONNECTIONS), loop
        if self._slots.locked():
            try:
                async with asyncio.timeout(self._pool_s):
                    await self._slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout(f"all {MAX_CONNECTIONS} connections stayed busy for "
                                        f"{self._pool_s:g} s") from None
        else:
            await self._slots.acquire()
        try:
            conn = self._pick() or await self._connect()
            self._busy.add(conn)
            try:
                response = await conn.exchange(head + body, self._read_s, self._write_s)
            except BaseException:
                conn.close()  # cancelled or failed mid-way: what it still holds is unknown
                raise
            finally:
                self._busy.discard(conn)
            self._keep(conn)
            return response
        finally:
            self._slots.release()

    def _pick(self) -> _Connection | None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        fresh = []
        for conn in self._idle:  # every one past its expiry, not only those above a fresh one
            if not conn.dead and conn.loop is loop and now - conn.idle_since < IDLE_EXPIRY_S:
                fresh.append(conn)
            else:
                conn.close()
        self._idle = fresh
        return fresh.pop() if fresh else None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_s):
                _, conn = await loop.create_connection(lambda: _Connection(loop), self.host, self.port)
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {self.host}:{self.port} within {self._connect_s:g} s") from None
        except OSError as e:
            raise httpx.ConnectError(str(e)) from None
        return conn

    def _keep(self, conn: _Connection) -> None:
        if conn.dead or self._closed or len(self._idle) >= MAX_IDLE:
            conn.close()
            return
        conn.idle_since = conn.loop.time()
        self._idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        for conn in [*self._idle, *self._busy]:
            conn.close()
        self._idle.clear()
