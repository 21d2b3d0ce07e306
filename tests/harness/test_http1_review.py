"""Hostile review of harness/http1.py: each test here failed on `wire` when written (the bug it
names), against real loopback servers."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import httpx
import pytest
from http_support import OK, answering, raw_server, read_request

from harness import ModelClient, http1
from harness.http1 import MAX_HEAD_BYTES, Origin

MESSAGES = [{"role": "user", "content": "x"}]
HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"


def test_an_idle_connection_does_not_keep_its_last_reply_body_alive():
    """The pool keeps up to MAX_IDLE connections: each must not pin the last body it read."""
    size = 8 * 1024 * 1024
    big = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size

    async def main() -> int:
        async with raw_server(answering(big)) as raw:
            origin = Origin("127.0.0.1", raw.port, httpx.Timeout(5).as_dict())
            try:
                tracemalloc.start()
                before = tracemalloc.get_traced_memory()[0]
                response = await origin.post(HEAD, b"")
                assert len(response.content) == size and len(origin._idle) == 1
                del response
                await asyncio.sleep(0)  # the handle that woke this task holds the reply's future
                gc.collect()
                held = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
                await origin.aclose()
            return held

    assert asyncio.run(main()) < size // 4


def test_a_connection_idle_past_the_expiry_is_closed_though_a_fresher_one_is_in_use(monkeypatch):
    """Documented: each idle connection kept 'for at most IDLE_EXPIRY_S'. Only the top of the
    LIFO idle list is ever looked at, so one under it stays open as long as traffic continues."""
    monkeypatch.setattr(http1, "IDLE_EXPIRY_S", 0.2)

    async def main() -> list[bool]:
        closed: list[bool] = []

        async def handle(reader, writer, n):
            closed.append(False)
            while await read_request(reader) is not None:
                await asyncio.sleep(0.05)  # the first two requests overlap: two connections
                writer.write(OK)
            closed[n] = True

        async with raw_server(lambda raw: handle) as raw:
            async with ModelClient(raw.url, max_retries=0) as client:
                await asyncio.gather(*(client.complete(model="m", messages=MESSAGES) for _ in range(2)))
                for _ in range(8):  # 0.8 s of traffic, 4x the expiry
                    await client.complete(model="m", messages=MESSAGES)
                    await asyncio.sleep(0.05)
                return list(closed)

    assert sorted(asyncio.run(main())) == [False, True]


@pytest.mark.parametrize("interim", [b"", b"HTTP/1.1 100 Continue\r\n\r\n"], ids=["plain", "after a 1xx"])
def test_a_head_over_the_bound_is_refused_though_it_ends_in_the_chunk_that_crosses_it(interim):
    """The bound is checked after each chunk only while the head is unfinished: a head whose
    last chunk takes it past MAX_HEAD_BYTES and ends it gets through (by up to a read's 256 KiB);
    after a 1xx the reset also forgets the rest of the chunk that ended it."""
    half = MAX_HEAD_BYTES // 2 + 1024

    async def main() -> httpx.Response:
        async def handle(reader, writer, n):
            await read_request(reader)
            writer.write(interim + b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * half + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.write(b"X-B: " + b"b" * half + b"\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            await asyncio.sleep(5)

        async with raw_server(lambda raw: handle) as raw:
            origin = Origin("127.0.0.1", raw.port, httpx.Timeout(5).as_dict())
            try:
                return await origin.post(HEAD, b"")
            finally:
                await origin.aclose()

    with pytest.raises(httpx.RemoteProtocolError, match=f"over {MAX_HEAD_BYTES} bytes"):
        asyncio.run(main())


def test_a_client_that_hit_its_connection_limit_on_one_loop_still_works_on_the_next(monkeypatch):
    """pytest-asyncio style: one client, a loop per test. The pool's Semaphore binds to the first
    loop that ever waits on it; waiting on it from the next loop is a RuntimeError (not an httpx
    error: the client's retries do not catch it, the run crashes)."""
    monkeypatch.setattr(http1, "MAX_CONNECTIONS", 1)

    async def handle(reader, writer, n):
        while await read_request(reader) is not None:
            await asyncio.sleep(0.02)
            writer.write(OK)

    async def two(client_box: list) -> None:
        async with raw_server(lambda raw: handle) as raw:
            if not client_box:
                client_box.append(Origin("127.0.0.1", raw.port, httpx.Timeout(5).as_dict()))
            origin = client_box[0]
            origin.port = raw.port
            await asyncio.gather(origin.post(HEAD, b""), origin.post(HEAD, b""))
            await origin.aclose()
            origin._closed = False

    box: list = []
    asyncio.run(two(box))
    asyncio.run(two(box))
