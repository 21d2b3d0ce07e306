"""The mock's HTTP/1.1 protocol (`protocol.Http11`): byte for byte what uvicorn's httptools protocol
sends, over real sockets, except that a reply whose start carries `BODY_FOLLOWS`, or that comes
whole (`WHOLE`), leaves in one write.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from experiments.bench import trick_protocol
from experiments.bench.floor import request_body
from experiments.bench.trick_protocol import Kept
from mockprovider import protocol, server
from mockprovider.cycle import BODY_FOLLOWS, WHOLE, in_task, takes_whole
from mockprovider.protocol import Http11, Resumed
from mockprovider.server import serve_in_thread

BIG = 200_000
"""A request body past uvicorn's 64 KiB high-water mark: reading pauses and resumes."""


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A raw ASGI app with one path per behaviour the protocol must keep."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/fail-before":
        raise RuntimeError("failed before replying")
    if path == "/whole":  # the whole reply in one message where the cycle takes it, else as ASGI says
        body = b'{"whole":true}'
        headers = [(b"x-request-id", b"req_1"), (b"content-length", b"%d" % len(body)),
                   (b"content-type", b"application/json")]
        if takes_whole(send):
            lines = b"".join([b"%s: %s\r\n" % header for header in headers])
            await send({"type": WHOLE, "status": 201, "head": lines, "body": body})
        else:
            await send({"type": "http.response.start", "status": 201, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        return
    if path == "/refuse":  # answered before its body is read, as a refusal is
        await reply(send, b"refused")
        return
    if path == "/slow":  # busy for the seconds its query names
        await asyncio.sleep(float(scope["query_string"]))
        await reply(send, b"slow")
        return
    if path == "/client":  # where the request came from, as the app sees it
        await reply(send, b"%s %s" % (scope["client"][0].encode(), scope["scheme"].encode()))
        return
    if path == "/read-then-wait":  # the body read with a pause, then a wait for the disconnect
        await reply(send, await read_then_wait(receive))
        return
    if path == "/echo":  # reads the whole body, however it came
        size, more = 0, True
        while more:
            message = await receive()
            size, more = size + len(message.get("body", b"")), message.get("more_body", False)
        body = b"%d bytes" % size
    else:
        body = b'{"ok":true}'
    start = {"type": "http.response.start", "status": 200,
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]}
    if path in ("/follows", "/fail-after-head", "/echo", "/str-body"):
        start[BODY_FOLLOWS] = True
    if path == "/chunked":
        start["headers"] = [(b"content-type", b"text/plain")]
        await send(start)
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await send({"type": "http.response.body", "body": b"two"})
        return
    await send(start)
    if path == "/fail-after-head":
        raise RuntimeError("failed after the head")
    if path == "/str-body":  # a body the transport refuses (not bytes): the send fails
        await send({"type": "http.response.body", "body": body.decode()})
    await send({"type": "http.response.body", "body": body})
    if path == "/follows":  # the reply is complete: what a client still connected looks like
        assert (await receive())["type"] == "http.disconnect"


async def read_then_wait(receive: Any) -> bytes:
    """What each `receive` gave: the first part of the body, the rest (which came while the app was
    busy), then what a `receive` after the whole body gives within 0.3 s (uvicorn: nothing)."""
    first = await receive()
    await asyncio.sleep(0.3)
    rest = await receive()
    try:
        after = repr(await asyncio.wait_for(receive(), 0.3)).encode()
    except TimeoutError:
        after = b"waited"
    return b"%r %r %s" % (first["body"], (rest["body"], rest["more_body"]), after)


async def reply(send: Any, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def served(http: Any, served_app: Any = app, **options: Any) -> Iterator[tuple[str, int]]:
    """`served_app` served with protocol `http` and uvicorn's `options`; its host and port."""
    with serve_in_thread(served_app, uvicorn_options={"http": http, **options}) as url:
        address = httpx.URL(url)
        yield address.host, address.port


def exchange(address: tuple[str, int], *sends: bytes) -> bytes:
    """Send each piece (a 100 Continue is awaited before the next), then read until the server closes."""
    with socket.create_connection(address, timeout=10) as s:
        for i, piece in enumerate(sends):
            s.sendall(piece)
            if i + 1 < len(sends):
                assert s.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    return re.sub(rb"date: [^\r]*\r\n", b"date: -\r\n", received)


CLOSE = b"Connection: close\r\n"
CASES = {
    "held head": [b"GET /follows HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "unhinted head": [b"GET /plain HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "HEAD of a held head": [b"HEAD /follows HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "chunked reply": [b"GET /chunked HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "HTTP/1.0": [b"GET /follows HTTP/1.0\r\n\r\n"],
    "pipelined": [b"GET /follows HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /plain HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "fails before its reply": [b"GET /fail-before HTTP/1.1\r\nHost: x\r\n\r\n"],
    "fails after a held head": [b"GET /fail-after-head HTTP/1.1\r\nHost: x\r\n\r\n"],
    "a held head's body refused": [b"GET /str-body HTTP/1.1\r\nHost: x\r\n\r\n"],
    "chunked request": [b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + CLOSE
                        + b"\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"],
    "large request": [b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % BIG + CLOSE + b"\r\n"
                      + b"x" * BIG],
    "100-continue": [b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
                     + CLOSE + b"\r\n", b"hello"],
    "malformed request": [b"GET /follows HTTP/1.1\r\nHost x\r\n\r\n"],
    "whole reply": [b"GET /whole HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "whole reply, HTTP/1.0": [b"GET /whole HTTP/1.0\r\n\r\n"],
    "HEAD of a whole reply": [b"HEAD /whole HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "whole replies pipelined": [b"GET /whole HTTP/1.1\r\nHost: x\r\n\r\n"
                                b"GET /whole HTTP/1.1\r\nHost: x\r\n\r\n"
                                b"GET /plain HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
    "a proxy's forwarded headers": [b"GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.1.2.3\r\n"
                                    b"X-Forwarded-Proto: https\r\n" + CLOSE + b"\r\n"],
    "no forwarded headers": [b"GET /client HTTP/1.1\r\nHost: x\r\n" + CLOSE + b"\r\n"],
}


class AtOnce:
    """`app`, saying every request may start without a task (`cycle.STARTS_WITHOUT_TASK`)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def starts_without_task(self, scope: dict[str, Any]) -> bool:
        return True

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, tuple[str, int]]]:
    with served(Http11) as ours, served(Http11, AtOnce(app)) as at_once, served("httptools") as uvicorns:
        yield {"ours": ours, "ours, started without a task": at_once, "uvicorn's": uvicorns}


@pytest.mark.parametrize("ours", ["ours", "ours, started without a task"])
@pytest.mark.parametrize("case", CASES)
def test_a_client_receives_the_bytes_uvicorns_own_protocol_sends(servers, case, ours):
    sent = exchange(servers[ours], *CASES[case])
    assert sent == exchange(servers["uvicorn's"], *CASES[case])
    assert sent.startswith(b"HTTP/1.1 ")  # a reply, not a closed connection


SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="-")


async def task_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Where each step of a request ran: in a task or not, before its body was read, after, and
    after `in_task`; and what a context variable an earlier request set reads here."""
    if scope["type"] != "http":
        return
    earlier = SEEN.get()
    SEEN.set(scope["path"])
    steps = [asyncio.current_task() is not None]
    size, more = 0, True
    while more:
        message = await receive()
        size, more = size + len(message.get("body", b"")), message.get("more_body", False)
    steps.append(asyncio.current_task() is not None)
    await in_task()
    steps.append(asyncio.current_task() is not None)
    own = SEEN.get()  # what it set before it waited: the task it went on in has its context
    await reply(send, b"%d bytes, in a task: %r, earlier: %s, own: %s"
                % (size, steps, earlier.encode(), own.encode()))


def test_a_request_started_without_a_task_gets_one_where_it_waits_or_asks_and_keeps_its_context():
    whole = b"POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    split = b"POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n" + CLOSE + b"\r\n"
    with served(Http11, AtOnce(task_app)) as address:
        replies = exchange_slowly(address, whole, split, b"hel", b"lo")
    # The first came whole: it ran in no task until `in_task`. The second waited for its body:
    # its rest ran in a task. Neither saw what the other set.
    assert replies.count(b"5 bytes, in a task: ") == 2
    assert b"in a task: [False, False, True], earlier: -, own: /one" in replies
    assert b"in a task: [False, True, True], earlier: -, own: /two" in replies
    with served(Http11, task_app) as address:  # an app that does not say so: a task for each
        assert b"in a task: [True, True, True]" in exchange(address, split + b"hello")


def _by_hand(app: Any, **options: Any) -> tuple[Http11, Kept, asyncio.AbstractEventLoop]:
    """`app` on an `Http11` connection driven by hand, from no task (as a socket's bytes come)."""
    loop = asyncio.new_event_loop()
    connection, transport = trick_protocol.connection(app, loop, **options)
    return connection, transport, loop


def _replied(transport: Kept) -> bool:
    """Whether the mock's chat reply (a tool call, at turn 1) was written."""
    written = b"".join(transport.writes)
    return written.startswith(b"HTTP/1.1 200 OK") and b"tool_calls" in written


@pytest.mark.parametrize("middleware", [False, True])
def test_the_mocks_chat_reply_is_written_as_its_bytes_are_read_unless_a_middleware_of_the_users_must_see_it(
        middleware):
    """The chat lane starts without a task: its reply is written before `data_received` returns,
    no loop run. With a middleware of the user's (which the lane lets see every request), the
    request gets a task, which the loop runs."""
    from mockprovider.app import create_app

    app = create_app()
    if middleware:
        app.add_middleware(ProxyHeadersMiddleware)  # any middleware the mock did not add itself
    connection, transport, loop = _by_hand(app)
    try:
        connection.data_received(trick_protocol.chat_request(request_body(1)))
        assert _replied(transport) is not middleware
        if middleware:
            loop.run_until_complete(asyncio.sleep(0.05))
            assert _replied(transport)
    finally:
        loop.close()


@pytest.mark.parametrize("reset", [False, True])
def test_a_request_started_without_a_task_runs_in_a_copy_of_the_connections_context_or_a_new_one(reset):
    """As a task would: a copy of the context the bytes came in, or with uvicorn's
    `reset_contextvars`, a context of its own."""
    connection, transport, loop = _by_hand(AtOnce(task_app), reset_contextvars=reset)
    context = contextvars.copy_context()
    context.run(SEEN.set, "the connection's")
    early: list[bytes] = []

    def bytes_come() -> None:
        context.run(connection.data_received, b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
        early.extend(transport.writes)

    try:
        loop.call_soon(bytes_come)
        loop.run_until_complete(asyncio.sleep(0.05))
    finally:
        loop.close()
    assert early == []  # it asked for a task (`in_task`): the loop ran the rest
    assert transport.writes[-1].endswith(b"earlier: %s, own: /one" % (b"-" if reset else b"the connection's"))
    assert context[SEEN] == "the connection's"  # what the request set stayed in its own copy


def test_a_request_started_without_a_task_is_served_before_the_400_for_the_bytes_after_it():
    """uvicorn makes a request's task before it answers unparseable bytes after it with a 400 and
    closes the connection: the request reads its body, not a disconnect, as it does here."""
    seen: list[bytes] = []

    async def reads(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            message = await receive()
            seen.append(message.get("body", message["type"].encode()))

    with served(Http11, AtOnce(reads)) as address:
        replied = exchange(address, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                                    b"GARBAGE\r\n\r\n")
    assert replied.startswith(b"HTTP/1.1 400 Bad Request") and seen == [b"hello"]


def test_a_resumed_coroutine_goes_on_where_it_waited_and_takes_what_is_thrown_in():
    """A task's first step takes what the coroutine waits on; then it gets the value its future
    gets, or an exception thrown in where it waits."""
    async def waits(future: asyncio.Future[int]) -> str:
        try:
            return f"got {await future}"
        except LookupError as exc:
            return f"thrown in: {exc!r}"

    async def resumed() -> str:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        request = waits(future)
        waiting = request.send(None)
        asyncio.get_running_loop().call_soon(future.set_result, 41)
        return await asyncio.get_running_loop().create_task(Resumed(request, waiting))

    assert asyncio.run(resumed()) == "got 41"
    loop = asyncio.new_event_loop()
    try:
        future: asyncio.Future[int] = loop.create_future()
        request = waits(future)
        going_on = Resumed(request, request.send(None))
        assert going_on.send(None) is future  # what it waits on, for the task to wait on
        with pytest.raises(StopIteration) as done:
            going_on.throw(KeyError("k"))  # as a task throws in
        assert done.value.value == "thrown in: KeyError('k')"
    finally:
        loop.close()


def test_a_resumed_coroutine_cancelled_before_its_task_first_steps_is_cancelled_where_it_waits():
    """As a task's own coroutine would be: the cancellation, with its message, reaches the code
    that waits, and what it waited on is cancelled too."""
    seen: list[tuple[Any, ...]] = []

    async def waits(future: asyncio.Future[int]) -> None:
        try:
            await future
        except asyncio.CancelledError as exc:
            seen.append(exc.args)
            raise

    async def cancelled_at_once() -> tuple[bool, asyncio.Future[int], str]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        request = waits(future)
        task = asyncio.get_running_loop().create_task(Resumed(request, request.send(None)))
        task.cancel("bye")
        await asyncio.wait({task}, timeout=2)  # a cancellation lost would leave it waiting
        return task.cancelled(), future, repr(task)

    loop = asyncio.new_event_loop()  # not `asyncio.run`: a task left waiting would hang its teardown
    try:
        was_cancelled, future, shown = loop.run_until_complete(cancelled_at_once())
    finally:
        loop.close()
    assert was_cancelled and seen == [("bye",)] and future.cancelled()
    assert "waits" in shown  # a task's repr names the coroutine it goes on with


def test_bytes_fed_from_a_task_start_their_request_in_a_task_of_its_own():
    """A harness that feeds a connection from a task: the request's steps must not run in that
    task (`in_task` would find it, and anyio's scopes would open in one task and close in another)."""
    ran_in: list[Any] = []

    async def where(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            ran_in.append(asyncio.current_task())
            await reply(send, b"ok")

    connection, transport, loop = _by_hand(AtOnce(where))

    async def feed() -> Any:
        connection.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.sleep(0.05)
        return asyncio.current_task()

    try:
        feeder = loop.run_until_complete(feed())
    finally:
        loop.close()
    assert len(ran_in) == 1 and ran_in[0] is not None and ran_in[0] is not feeder
    assert transport.writes[-1].endswith(b"ok")


def test_a_request_started_without_a_task_that_waits_is_cancelled_at_shutdown_as_any_other():
    """uvicorn cancels the server's tasks once its graceful shutdown (1 s here) runs out: the task
    made for such a request's rest is among them."""
    cancelled: list[tuple[Any, ...]] = []

    async def waits(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError as exc:
            cancelled.append(exc.args)
            raise

    with socket.socket() as held:
        with served(Http11, AtOnce(waits)) as address:
            held.connect(address)
            held.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)
    assert cancelled == [("Task cancelled, timeout graceful shutdown exceeded",)]


def test_the_cycle_takes_a_whole_reply_and_a_proxys_headers_still_count(servers):
    assert b"201 Created" in exchange(servers["ours"], *CASES["whole reply"])
    assert exchange(servers["ours"], *CASES["a proxy's forwarded headers"]).endswith(b"10.1.2.3 https")
    assert exchange(servers["ours"], *CASES["no forwarded headers"]).endswith(b"127.0.0.1 http")


@pytest.mark.parametrize("case", ["whole reply", "whole replies pipelined", "held head"])
def test_a_connection_close_among_the_servers_own_headers_ends_the_connection_as_under_uvicorn(case):
    """A server configured to send `Connection: close` on every reply (uvicorn's `headers`): the
    reply says so once and the connection ends after it, pipelined requests unanswered."""
    replies = []
    for http in (Http11, "httptools"):
        with served(http, headers=[("Connection", "close")]) as address:
            replies.append(exchange(address, *CASES[case]))
    assert replies[0] == replies[1]
    assert replies[0].count(b"HTTP/1.1") == 1 and replies[0].lower().count(b"connection: close") == 1


class Forwarded(ProxyHeadersMiddleware):
    """A user's proxy-headers middleware that reads RFC 7239's `Forwarded` too."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (b"forwarded", b"proto=https") in scope["headers"]:
            scope["scheme"] = "https"
        await super().__call__(scope, receive, send)


def test_a_subclass_of_uvicorns_proxy_headers_middleware_is_called_for_every_request():
    request = b"GET /client HTTP/1.1\r\nHost: x\r\nForwarded: proto=https\r\n" + CLOSE + b"\r\n"
    replies = []
    for http in (Http11, "httptools"):
        with served(http, Forwarded(app, trusted_hosts="*"), proxy_headers=False) as address:
            replies.append(exchange(address, request))
    assert replies[0] == replies[1] and replies[0].endswith(b"127.0.0.1 https")


def exchange_slowly(address: tuple[str, int], *sends: bytes, pause: float = 0.1) -> bytes:
    """Send each piece `pause` seconds after the one before, then read until the server closes."""
    with socket.create_connection(address, timeout=10) as s:
        for i, piece in enumerate(sends):
            if i:
                time.sleep(pause)
            s.sendall(piece)
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    return re.sub(rb"date: [^\r]*\r\n", b"date: -\r\n", received)


def test_a_receive_after_the_whole_body_waits_though_its_last_part_came_between_receives(servers):
    """The first `receive` waits (the cycle makes its event), the rest of the body comes while the
    app is busy and is taken without waiting; a `receive` after it waits for the disconnect, as
    under uvicorn, rather than returning at once with an empty body."""
    head = b"POST /read-then-wait HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n" + CLOSE + b"\r\n"
    ours = exchange_slowly(servers["ours"], head, b"hello", b" world")
    assert ours == exchange_slowly(servers["uvicorn's"], head, b"hello", b" world")
    assert ours.endswith(b"b'hello' (b' world', False) waited")


class Recorded:
    """A connection's transport, recording each write."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def write(self, data: bytes) -> None:
        Recording.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class Recording(Http11):
    """`Http11`, recording each write to its connections."""

    writes: list[bytes] = []

    def connection_made(self, transport: Any) -> None:
        super().connection_made(Recorded(transport))


@pytest.fixture
def recording(monkeypatch) -> list[bytes]:
    Recording.writes = []
    monkeypatch.setattr(server, "http_protocol", lambda: Recording)  # what serve_in_thread serves with
    return Recording.writes


def test_the_mocks_chat_reply_leaves_in_one_write_and_other_replies_as_before(recording):
    with serve_in_thread() as url, httpx.Client(base_url=url) as client:
        chat = client.post("/chat/completions", content=request_body(1),
                           headers={"content-type": "application/json"})
        assert chat.status_code == 200 and chat.json()["choices"][0]["finish_reason"] == "tool_calls"
        assert len(recording) == 1 and recording[0].endswith(chat.content)
        assert client.get("/models").status_code == 200  # through the router: head, then body
        assert len(recording) == 3


def test_a_held_head_goes_out_alone_when_the_app_fails_after_it(servers):
    reply = exchange(servers["ours"], *CASES["fails after a held head"])
    head = (b"HTTP/1.1 200 OK\r\ndate: -\r\nserver: uvicorn\r\ncontent-type: application/json\r\n"
            b"content-length: 11\r\n\r\n")
    assert reply == head


def test_auto_is_the_mocks_protocol_and_the_named_ones_are_uvicorns():
    assert protocol.http_protocol() is Http11 and protocol.http_protocol("auto") is Http11
    assert [protocol.http_protocol(n) for n in ("httptools", "h11")] == ["httptools", "h11"]


def _chat_exchange(http: Any, wrap: Any = None, options: tuple[str, ...] = ("",)) -> bytes:
    """The mock's replies to chat requests sent over a raw socket, one per `options` (an
    `x-mock-options` header, or none), its ids and clocks blanked."""
    from mockprovider.app import create_app

    body = request_body(1)
    replies = b""
    with served(http, create_app() if wrap is None else wrap(create_app())) as address:
        for said in options:
            header = b"x-mock-options: %s\r\n" % said.encode() if said else b""
            replies += exchange(address, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + header
                                + b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
                                + CLOSE + b"\r\n" + body)
    replies = re.sub(rb"(x-request-id|openai-processing-ms): [^\r]*", rb"\1: -", replies)
    return re.sub(rb'"(id|created)":("[^"]*"|\d+)', rb'"\1":-', replies)


def test_the_mocks_chat_reply_is_the_bytes_it_sends_under_uvicorns_protocol():
    ours = _chat_exchange(Http11)
    assert ours == _chat_exchange("httptools")
    assert ours.startswith(b"HTTP/1.1 200 OK\r\n") and b'"finish_reason":"tool_calls"' in ours


def test_chat_replies_under_changing_options_state_each_ones_limits_as_under_uvicorns_protocol():
    """The rendered limit lines are kept for the last options: other options, then the defaults
    again, are each stated as the pairs uvicorn's protocol is sent."""
    options = ("", "ratelimit=60:9000", "ratelimit=60:9000+remaining=5:100", "")
    ours = _chat_exchange(Http11, options=options)
    assert ours == _chat_exchange("httptools", options=options)
    assert ours.count(b"x-ratelimit-limit-requests: 60\r\n") == 2
    assert ours.count(b"x-ratelimit-remaining-tokens: 100\r\n") == 1
    assert ours.count(b"x-ratelimit-limit-requests: 10000\r\n") == 2


def test_a_middleware_around_the_mock_sees_its_chat_reply_as_asgi_messages():
    seen: list[str] = []

    def wrap(inner: Any) -> Any:
        async def outer(scope: dict[str, Any], receive: Any, send: Any) -> None:
            async def noting(message: dict[str, Any]) -> None:
                seen.append(message["type"])
                await send(message)
            await inner(scope, receive, noting)
        return outer

    assert _chat_exchange(Http11, wrap) == _chat_exchange(Http11)
    assert seen == ["http.response.start", "http.response.body"]


KEEP_ALIVE_S = 0.3
PLAIN = b"GET /plain HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture(scope="module")
def short_keep_alive() -> Iterator[dict[str, tuple[str, int]]]:
    """Both protocols, with a keep-alive timeout of `KEEP_ALIVE_S`."""
    with served(Http11, timeout_keep_alive=KEEP_ALIVE_S) as ours, \
            served("httptools", timeout_keep_alive=KEEP_ALIVE_S) as uvicorns:
        yield {"ours": ours, "uvicorn's": uvicorns}


def _replies(s: socket.socket, count: int) -> int:
    """Read until `count` replies came; how many did (fewer if the server closed first)."""
    received = b""
    while received.count(b"HTTP/1.1 200") < count:
        chunk = s.recv(65536)
        if not chunk:
            break
        received += chunk
    return received.count(b"HTTP/1.1 200")


def _closed_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False


@pytest.mark.parametrize("side", ["ours", "uvicorn's"])
def test_a_connection_kept_busy_past_the_keep_alive_timeout_stays_open_then_closes_once_idle(
        short_keep_alive, side):
    with socket.create_connection(short_keep_alive[side], timeout=5) as s:
        for _ in range(8):  # a request every half timeout: 4 timeouts in all, never idle for one
            s.sendall(PLAIN)
            assert _replies(s, 1) == 1
            time.sleep(KEEP_ALIVE_S / 2)
        assert not _closed_within(s, KEEP_ALIVE_S / 4)  # idle for 3/4 of the timeout so far
        assert _closed_within(s, 10 * KEEP_ALIVE_S)


@pytest.mark.parametrize("side", ["ours", "uvicorn's"])
def test_a_request_half_sent_is_not_cut_off_by_the_keep_alive_timeout(short_keep_alive, side):
    with socket.create_connection(short_keep_alive[side], timeout=5) as s:
        s.sendall(PLAIN)
        assert _replies(s, 1) == 1
        s.sendall(b"GET /plain HTTP/1.1\r\nHo")
        assert not _closed_within(s, 3 * KEEP_ALIVE_S)
        s.settimeout(5)
        s.sendall(b"st: x\r\n\r\n")
        assert _replies(s, 1) == 1


def test_an_idle_connection_is_checked_a_few_times_before_it_closes_not_in_a_busy_loop():
    """uvloop's clock moves in whole milliseconds, once per pass of its loop: a check re-armed for
    less than that would run again at once, pass after pass, until the clock ticked."""
    checks = []

    class Counted(Http11):
        def _idle_check(self) -> None:
            checks.append(1)
            super()._idle_check()

    with served(Counted, timeout_keep_alive=KEEP_ALIVE_S, loop="uvloop") as address:
        for _ in range(5):
            with socket.create_connection(address, timeout=5) as s:
                for _ in range(2):  # the second reply comes within the timeout: the check is re-armed
                    s.sendall(PLAIN)
                    assert _replies(s, 1) == 1
                    time.sleep(KEEP_ALIVE_S / 6)
                assert _closed_within(s, 10 * KEEP_ALIVE_S)
    assert len(checks) <= 3 * 5


LATE_KEEP_ALIVE_S = 1.0
"""The keep-alive timeout of the late-body tests: each step keeps half of it as its margin."""
REFUSED = b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"


@pytest.mark.parametrize("then", ["half a timeout after its reply",
                                  "in two parts, the second after a timeout",
                                  "with another request in the same bytes"])
def test_a_body_that_comes_after_its_reply_leaves_the_connection_to_the_keep_alive_timeout(then):
    """The app answered before the body came (a refusal): the body's bytes count as activity,
    and once they end the connection is idle again. uvicorn's protocol arms no timer then, and
    such a connection stays open for good; here it closes a timeout later, whether or not the
    reply's own timer is still pending, and a request that follows the body in the same bytes
    is answered in full first, however long it takes."""
    timeout = LATE_KEEP_ALIVE_S
    with served(Http11, timeout_keep_alive=timeout) as address, \
            socket.create_connection(address, timeout=15) as s:
        s.sendall(REFUSED)
        assert _replies(s, 1) == 1
        time.sleep(timeout / 2)
        if then == "half a timeout after its reply":
            s.sendall(b"hello")
        elif then == "in two parts, the second after a timeout":  # the reply's timer finds it busy
            s.sendall(b"hel")
            time.sleep(timeout)
            s.sendall(b"lo")
        else:
            s.sendall(b"hello" + b"GET /slow?%.1f HTTP/1.1\r\nHost: x\r\n\r\n" % (2 * timeout))
            assert _replies(s, 1) == 1
        assert not _closed_within(s, timeout / 2)
        assert _closed_within(s, 10 * timeout)
