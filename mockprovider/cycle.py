"""The mock's request cycle: uvicorn's `RequestResponseCycle`, with two ways to send a reply in
one write.

The head and the body of a reply leave in two writes under uvicorn's cycle, so a client reads two
segments and its event loop wakes twice per reply. `Cycle` is that cycle (every behaviour a
client can see kept: keep-alive, pipelining, `Expect: 100-continue`, HEAD, chunked replies, a
500 when the app fails before replying, the connection closed when it fails after) with two ways
to send a reply in one write. A start message that carries `BODY_FOLLOWS` promises that the
reply's first body message follows at once, without waiting on anything, so its head is held
and leaves with that body (docs/benchmarks.md shows how to time it against uvicorn's own); the
head goes out by itself if the app closes the reply or fails first. An app handed the cycle's
own `send` may instead send a reply whole (`WHOLE`), its head already rendered, so the cycle
neither walks nor checks its headers. The chat lane's JSON reply comes whole, or with
`BODY_FOLLOWS` where it cannot (`takes_whole`); any other reply is written as uvicorn writes it.
Header names and values are checked in one search each, as uvicorn refuses them one by one, and
`receive` makes an event to wait on only when it must wait. The cycle is written out rather than
uvicorn's subclassed with a transport that holds the head: that smaller version, timed request
by request against this one, was slower per request at turn 1.

`protocol.Http11` serves each request with a `Cycle`, and runs a request's first steps at once,
in no task, where the app says they may (`starts_without_task`); the app then reaches anything
that needs a task only after `in_task`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
BODY_FOLLOWS = "mockprovider.body_follows"
"""A key of an `http.response.start` message: its first body message follows at once (ASGI
servers ignore keys they do not know)."""
WHOLE = "mockprovider.whole_reply"
"""The type of a message `Cycle.send` takes besides ASGI's: a whole reply in one message,
`{"type": WHOLE, "status": int, "head": bytes, "body": bytes}`, `head` being the app's header
lines, each ending in CRLF, names in lower case, valid by construction, with a `content-length`
that is the body's. The cycle adds its status line, the server's own headers (`date`,
`server`) and `connection: close` when the connection ends, checks nothing else, and writes
the reply in one write. An app sends it only where `takes_whole` says so: a middleware in
between would not know it, and the server's own headers may frame the reply themselves."""


class Cycle:
    """One request and its reply on a `protocol.Http11` connection (uvicorn's `RequestResponseCycle`):
    `protocol` is that connection (typed loosely: this module imports nothing of the mock)."""

    __slots__ = (
        "scope", "protocol", "transport", "flow", "keep_alive", "waiting_for_100_continue",
        "disconnected", "body", "more_body", "arrived", "event", "response_started",
        "response_complete", "chunked_encoding", "expected_content_length", "head", "on_response",
    )

    def __init__(self, protocol: Any, scope: dict[str, Any], *, keep_alive: bool,
                 expect_100_continue: bool):
        self.scope = scope
        self.protocol = protocol
        self.transport = protocol.transport
        self.flow = protocol.flow
        self.keep_alive = keep_alive
        self.waiting_for_100_continue = expect_100_continue
        self.disconnected = False
        self.body = bytearray()
        self.more_body = True
        self.arrived = False
        """Whether body or its end came (or the connection went) since `receive` last returned."""
        self.event: asyncio.Event | None = None
        """What a `receive` waiting for the body waits on; made only when one must wait."""
        self.response_started = False
        self.response_complete = False
        self.chunked_encoding: bool | None = None
        self.expected_content_length = 0
        self.head: bytes | None = None
        """The reply's status line and headers, until they go out with its first body."""
        self.on_response: Callable[[], None] = protocol.on_response_complete

    def wake(self) -> None:
        """Body came, the body ended, the reply finished or the connection went: `receive` returns."""
        self.arrived = True
        if self.event is not None:
            self.event.set()

    # ASGI exception wrapper, as uvicorn's.
    async def run_asgi(self, app: Callable[..., Any]) -> None:
        logger = self.protocol.logger
        try:
            result = await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                await self.send_500_response()
            else:
                self.close()
        else:
            if result is not None:
                logger.error("ASGI callable should return None, but returned '%s'.", result)
                self.close()
            elif not self.response_started and not self.disconnected:
                logger.error("ASGI callable returned without starting response.")
                await self.send_500_response()
            elif not self.response_complete and not self.disconnected:
                logger.error("ASGI callable returned without completing response.")
                self.close()
        finally:
            self.on_response = _nothing

    async def send_500_response(self) -> None:
        await self.send({"type": "http.response.start", "status": 500, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21"),
            (b"connection", b"close"),
        ]})
        await self.send({"type": "http.response.body", "body": b"Internal Server Error", "more_body": False})

    def close(self) -> None:
        """Close the connection, the head first if it has not gone out."""
        self.flush()
        self.transport.close()

    def flush(self) -> None:
        """The held head by itself: no body came with it."""
        head, self.head = self.head, None
        if head is not None and not self.transport.is_closing():
            self.transport.write(head)

    def _write(self, data: bytes) -> None:
        head = self.head
        # The head let go only once it has left: a body that cannot be written leaves it to `close`.
        self.transport.write(data if head is None else head + data)
        self.head = None

    async def send(self, message: dict[str, Any]) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if kind == WHOLE and not self.response_started:
            self._whole(message)
        elif not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{kind}'.")
            self._start(message)
        elif not self.response_complete:
            if kind != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
            self._body(message)
        else:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response already completed.")

    def _start(self, message: dict[str, Any]) -> None:
        self.response_started = True
        self.waiting_for_100_continue = False
        status_code = message["status"]
        headers = self.protocol.server_state.default_headers + list(message.get("headers", []))
        self._log(status_code)
        content = [STATUS_LINE[status_code]]
        check_headers(headers)
        has_connection_close = False
        for name, value in headers:
            name = name.lower()
            if name == b"content-length" and self.chunked_encoding is None:
                self.expected_content_length = int(value.decode())
                self.chunked_encoding = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.expected_content_length = 0
                self.chunked_encoding = True
            elif name == b"connection":
                connection = [token.lower().strip() for token in value.split(b",")]
                if b"close" in connection:
                    self.keep_alive = False
                    has_connection_close = True
            content += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not has_connection_close:
            content.append(b"connection: close\r\n")
        if self.chunked_encoding is None and self.scope["method"] != "HEAD" and status_code not in (204, 304):
            self.chunked_encoding = True
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        if message.get(BODY_FOLLOWS):
            self.head = b"".join(content)
        else:
            self.transport.write(b"".join(content))

    def _whole(self, message: dict[str, Any]) -> None:
        self.response_started = True
        self.waiting_for_100_continue = False
        defaults = self.protocol.default_head()
        if defaults is None:
            raise RuntimeError("A whole reply sent where the server's own headers frame it (takes_whole).")
        status_code = message["status"]
        self._log(status_code)
        body = b"" if self.scope["method"] == "HEAD" else message["body"]
        close = b"" if self.keep_alive else b"connection: close\r\n"
        self.transport.write(b"".join((STATUS_LINE[status_code], defaults, message["head"], close, b"\r\n",
                                       body)))
        self._complete()

    def answered_at_once(self, app: Any) -> bool:
        """Whether `app` answered this request at once (`ANSWERS_AT_ONCE`): only a request whose
        body is all here and that waits for no `100 Continue`, when the reply may go whole."""
        at_once = getattr(app, ANSWERS_AT_ONCE, None)
        if (at_once is None or self.more_body or self.waiting_for_100_continue or self.flow.write_paused
                or self.protocol.default_head() is None):
            return False  # (a client not reading its replies: the lane waits for it to, `send`)
        return at_once(self.scope, bytes(self.body), self._sent_whole)

    def may_answer_at_once(self, app: Any) -> bool:
        """Whether this request, its body still to come, may wait for it unrun, for `app` to answer
        it at once then: the client sends the body unasked (no `100 Continue` awaited), declared a
        length the connection reads whole without pausing, and `app` might answer it
        (`MIGHT_ANSWER_AT_ONCE`); else the lane runs now, and refuses what it refuses at once."""
        might = getattr(app, MIGHT_ANSWER_AT_ONCE, None)
        if might is None or self.waiting_for_100_continue:
            return False
        declared = next((value for name, value in self.scope["headers"] if name == b"content-length"), b"")
        if not (declared.isdigit() and len(declared) < 8 and int(declared) <= HIGH_WATER_LIMIT):
            return False
        return might(self.scope, int(declared))

    def _sent_whole(self, head: bytes, body: bytes) -> None:
        self._whole({"status": 200, "head": head, "body": body})

    def _body(self, message: dict[str, Any]) -> None:
        body = message.get("body", b"")
        more_body = message.get("more_body", False)
        if self.scope["method"] == "HEAD":
            self.expected_content_length = 0
            self.flush()
        elif self.chunked_encoding:
            content = [b"%x\r\n" % len(body), body, b"\r\n"] if body else []
            if not more_body:
                content.append(b"0\r\n\r\n")
            self._write(b"".join(content))
        else:
            num_bytes = len(body)
            if num_bytes > self.expected_content_length:
                raise RuntimeError("Response content longer than Content-Length")
            self.expected_content_length -= num_bytes
            self._write(body)
        if not more_body:
            if self.expected_content_length != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self._complete()

    def _complete(self) -> None:
        self.response_complete = True
        self.wake()
        if not self.keep_alive:
            self.transport.close()
        self.on_response()

    def _log(self, status_code: int) -> None:
        protocol = self.protocol
        if protocol.access_log:
            protocol.access_logger.info(
                '%s - "%s %s HTTP/%s" %d', get_client_addr(self.scope), self.scope["method"],
                get_path_with_query_string(self.scope), self.scope["http_version"], status_code,
            )

    async def receive(self) -> dict[str, Any]:
        if self.waiting_for_100_continue and not self.transport.is_closing():
            self.transport.write(CONTINUE)
            self.waiting_for_100_continue = False
        if not self.disconnected and not self.response_complete:
            self.flow.resume_reading()
            event = self.event
            if not self.arrived:
                if event is None:
                    event = self.event = asyncio.Event()
                await event.wait()
                event.clear()
            elif event is not None:  # set with `arrived`: cleared with it, as uvicorn clears its event
                event.clear()
            self.arrived = False
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        message = {"type": "http.request", "body": bytes(self.body), "more_body": self.more_body}
        self.body = bytearray()
        return message


STARTS_WITHOUT_TASK = "starts_without_task"
"""The name of an app's method `(scope) -> bool`: whether `protocol.Http11` may run that request's
first steps at once, in no task, up to its first wait (a task is made then, for the rest). A
task is made and scheduled per request otherwise, and a request that never waits, as an agent
loop's chat request does not, needs none: making it, and the turn of the loop it waits for, is
saved (results/bench.md, speed tricks: "a request started without a task"). An app that says
yes reaches anything that needs a current task (anyio, so Starlette's streams and
`is_disconnected`; `asyncio.timeout`) only after `in_task`."""


ANSWERS_AT_ONCE = "answer_at_once"
"""The name of an app's method `(scope, body, send_whole) -> bool`, for a request that starts
without a task, once its whole body is here: whether the app answered it there and then, with no
coroutine, its header lines and body given to `send_whole` (as a `WHOLE` message's, status 200).
One that says no has sent nothing, and the request is run as any other. Such an app also has
`MIGHT_ANSWER_AT_ONCE`."""
MIGHT_ANSWER_AT_ONCE = "might_answer_at_once"
"""The name of an app's method `(scope, length) -> bool`: whether it might answer at once
(`ANSWERS_AT_ONCE`) that request, with a body of `length` bytes, by what its head shows. Only then
is a request whose head came alone held, unrun, until its body comes (`protocol.Http11.held`)."""


def starts_without_task(app: Any, scope: dict[str, Any]) -> bool:
    """Whether `app` says `scope`'s first steps may run in no task (`STARTS_WITHOUT_TASK`)."""
    says = getattr(app, STARTS_WITHOUT_TASK, None)
    return says is not None and says(scope)


async def in_task() -> None:
    """Return in a task: a request started without one (`STARTS_WITHOUT_TASK`) waits here, once,
    for the task the server makes for its rest; in a task already, return at once."""
    if asyncio.current_task() is None:
        await asyncio.sleep(0)


def takes_whole(send: Callable[..., Any]) -> bool:
    """Whether `send` takes a `WHOLE` message: it is a `Cycle`'s own, and the server's own headers
    say nothing of the framing (a `connection: close` configured by hand, say), which a reply
    must then be walked for, as uvicorn walks it."""
    cycle = getattr(send, "__self__", None)
    return type(cycle) is Cycle and cycle.protocol.default_head() is not None


def check_headers(headers: list[tuple[bytes, bytes]]) -> None:
    """Refuse a header name or value uvicorn refuses. One search over every name and one over
    every value: each pattern is one character class, so it finds a character in the joined
    bytes exactly when it is in one of them."""
    if HEADER_RE.search(b"".join([name for name, _ in headers])):
        raise RuntimeError("Invalid HTTP header name.")
    if HEADER_VALUE_RE.search(b"".join([value for _, value in headers])):
        raise RuntimeError("Invalid HTTP header value.")


def _nothing() -> None:
    pass
