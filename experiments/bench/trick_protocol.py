"""The mock's own server timed by hand: a request started without a task, against the same
request given a task of its own; a chat request answered at once, against the chat lane
answering it; a transcript remembered after the reply, against before it.

`protocol.Http11` runs the first steps of a request the app says may start without a task
(`cycle.STARTS_WITHOUT_TASK`: the mock's chat lane) at once, once its bytes are parsed; uvicorn
makes and schedules a task for every request. Both sides here are `Http11` serving the mock's
turn-1 chat request, sent as the official client sends it, over a transport that keeps what is
written; the plain side's app is the same app behind a `functools.partial`, which says nothing,
so each of its requests gets a task and waits a turn of the loop for it. Each request's bytes
come from the loop (`call_soon`), as a socket's do, never from a task. A chat request whose body
came whole is answered there and then (`cycle.ANSWERS_AT_ONCE`), with no coroutine at all: the
task row's sides both answer through the chat lane (`lane_only`), so that row times its own step.

The benchmarks time the tricks on asyncio's own loop. On uvloop, where the mock serves by default,
a task costs less, so this in-process ratio is smaller there; what a server saves is best read as
processes, by `experiments.bench.against` (docs/benchmarks.md), as its server CPU per request.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import re
import time
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from experiments.bench.floor import TASK, request_body
from experiments.bench.tricks import Batch, Trick, patched_batch
from mockprovider import create_app
from mockprovider.bench_hooks import app as mock_app
from mockprovider.bench_hooks import chat, memo, protocol


class Kept(asyncio.Transport):
    """A connection's transport, for a protocol driven by hand: it keeps each write (`writes`) and
    notes its close (`closed`, as a server closes after a 500 or a 400); `replied`, when set, is
    done at the next write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.replied: asyncio.Future[None] | None = None
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        if self.replied is not None and not self.replied.done():
            self.replied.set_result(None)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def connection(app: Any, loop: asyncio.AbstractEventLoop, transport: Kept | None = None,
               **options: Any) -> tuple[Any, Kept]:
    """`app` on a new `Http11` connection over `transport` (a new `Kept` by default), for bytes fed
    by hand; `options`, uvicorn's settings."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", http=protocol.Http11,
                            **options)
    config.load()
    served = protocol.Http11(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    transport = Kept() if transport is None else transport
    served.connection_made(transport)
    return served, transport


class _LaneOnly(mock_app.MockApp):
    answer_at_once = None  # type: ignore[assignment]
    might_answer_at_once = None  # type: ignore[assignment]


def lane_only(app: mock_app.MockApp) -> mock_app.MockApp:
    """`app`, copied, answering no chat request at once (`cycle.ANSWERS_AT_ONCE`) and holding no
    head for its body: its chat lane answers each, started without a task.
    A copy of the same class but for those two methods, so neither side pays a layer the other
    does not."""
    plain = copy.copy(app)
    plain.__class__ = _LaneOnly
    return plain


def chat_request(body: bytes, path: bytes = b"/v1/chat/completions") -> bytes:
    """A chat POST of `body`, as bytes on the wire."""
    return (b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (path, len(body), body))


def _served(app: Any, request: bytes, loop: asyncio.AbstractEventLoop) -> Batch:
    """`request` n times, one after another, on one `Http11` connection serving `app`."""
    served, transport = connection(app, loop, interface="asgi3")

    async def many(n: int) -> bytes:
        for _ in range(n):
            transport.writes.clear()
            transport.replied = replied = loop.create_future()
            loop.call_soon(served.data_received, request)  # from the loop, as a socket's bytes come
            await replied  # a task, where there is one, ends in the step that wrote
        return b"".join(transport.writes)

    return lambda n: lambda: loop.run_until_complete(many(n))


def _without_ids(out: bytes) -> bytes:
    out = re.sub(rb"(date|x-request-id|openai-processing-ms): [^\r]*\r\n", b"", out)
    return re.sub(rb'"(id|created)":("[^"]*"|\d+)', b"", out)


def _client_request(body: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    return b"POST /v1/chat/completions HTTP/1.1\r\n%s\r\n%s" % (
        b"".join(b"%s: %s\r\n" % pair for pair in headers), body)


def started_without_task_trick(body: bytes, headers: list[tuple[bytes, bytes]],
                               loop: asyncio.AbstractEventLoop) -> Trick:
    """`body` sent to the chat route with `headers` (the official client's), the lane answering
    it on both sides (`lane_only`)."""
    app = lane_only(create_app())
    request = _client_request(body, headers)
    # A fixed batch: a batch runs the loop once (`run_until_complete`), a cost both sides share
    # that a calibrated batch of a few requests would let weigh on the ratio.
    return Trick(name="a request started without a task", where="protocol.Http11, app.MockApp", turn=1,
                 batch=16, key=_without_ids, with_=_served(app, request, loop),
                 without=_served(functools.partial(app), request, loop))


def answered_at_once_trick(body: bytes, headers: list[tuple[bytes, bytes]],
                           loop: asyncio.AbstractEventLoop) -> Trick:
    """`body` sent to the chat route with `headers` (the official client's), answered as its bytes
    are parsed (`apis.chat_at_once`), against the chat lane answering it started without a task."""
    app = create_app()
    request = _client_request(body, headers)
    return Trick(name="a chat request answered at once", where="apis.chat_at_once, cycle.Cycle", turn=1,
                 batch=16, key=_without_ids, with_=_served(app, request, loop),
                 without=_served(lane_only(app), request, loop))


class _Clocked(Kept):
    """`Kept`, noting when it was last written to."""

    written_at = 0.0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written_at = time.perf_counter()
        super().write(data)


def remembered_later_trick(loop: asyncio.AbstractEventLoop) -> Trick:
    """The time from a turn-100 request's bytes to its reply's write, on `Http11` serving the mock:
    the request, answered at once (`apis.chat_at_once`, which defers as the chat lane does),
    remembers its transcript (`memo`) once the reply is written; the plain
    side remembers it as it is counted, before (`chat.remembered_later` a no-op). Each request is
    a new conversation whose turn 99 the mock answered just before, outside the timing, with the
    memory emptied first, so it holds just what a loop over those conversations would have left.
    The step is moved, not saved: the request costs what it did (`uses=0`, so the page claims no
    share of it)."""
    app = create_app()
    template99, template100 = request_body(99), request_body(100)
    task, batches = TASK.encode(), itertools.count()

    def batch(n: int) -> Any:
        transport = _Clocked()
        served, _ = connection(app, loop, transport, timeout_keep_alive=3600)
        tasks = [b"%s #%d.%d" % (task, next(batches), k) for k in range(n)]
        memo.MEMORY.clear()
        for name in tasks:  # turn 99 of each, answered: its transcript is remembered
            served.data_received(chat_request(template99.replace(task, name)))
        requests = [chat_request(template100.replace(task, name)) for name in tasks]

        def go() -> tuple[bytes, float]:
            spent = 0.0
            for request in requests:
                transport.writes.clear()
                started = time.perf_counter()
                served.data_received(request)  # from no task, as a socket's bytes come
                if transport.written_at < started:
                    raise RuntimeError("a reply was not written as its request's bytes were read")
                spent += transport.written_at - started
            return b"".join(transport.writes), spent
        return go

    return Trick(name="transcript remembered after the reply", where="apis.chat, reading.memo",
                 turn=100, batch=16, uses=0, key=_without_ids, self_timed=True, with_=batch,
                 without=patched_batch(batch, chat, "remembered_later", lambda read, scope: read))
