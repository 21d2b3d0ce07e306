"""Our keep-alive HTTP/1.1 connections to a plain-http provider (harness/http1.py), through
`ModelClient`: replies read as httpx reads them, connections kept and retired as httpcore keeps
and retires them, failures as httpx's own exceptions, cancellation and concurrency, all against
real servers on loopback (the mock, or a raw one for replies no real server gives)."""

from __future__ import annotations

import asyncio
import gc
import gzip
import socket
import struct
import zlib
from pathlib import Path

import httpx
import pytest
from http_support import OK, OK_BODY, answering, raw_server, read_request, reply

from harness import Cancel, ModelClient, http1
from harness.cancel import Cancelled
from harness.http1 import MAX_HEAD_BYTES, Origin
from harness.model import ProviderError

MESSAGES = [{"role": "user", "content": "x"}]


async def _send(client: ModelClient, attempt: int = 0) -> httpx.Response:
    body = client._bodies.body("m", MESSAGES, None, None)
    return await client._send(body, attempt, {})


def _seen(response: httpx.Response) -> tuple:
    return (response.status_code, response.headers.raw, response.content,
            response.extensions["http_version"], response.extensions["reason_phrase"])


REPLIES = {
    "length, a header twice": b"HTTP/1.1 200 OK\r\nX-Dup: 1\r\nx-dup: 2\r\nContent-Length: 2\r\n\r\nhi",
    "chunked, with an extension and a trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                                b"\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: t\r\n\r\n",
    "until close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
    "HTTP/1.0": b"HTTP/1.0 200 Fine\r\nX-Old: yes\r\n\r\nold style",
    "1xx first": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                 b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "gzip": reply(gzip.compress(OK_BODY), headers=b"Content-Encoding: gzip\r\n"),
    "deflate": reply(zlib.compress(OK_BODY), headers=b"Content-Encoding: deflate\r\n"),
    "no content": b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
    "429": reply(b'{"error":{"message":"slow down"}}', status=b"429 Too Many Requests",
                 headers=b"retry-after-ms: 10\r\n"),
}


@pytest.mark.parametrize("raw_reply", REPLIES.values(), ids=REPLIES.keys())
def test_a_reply_reads_as_httpx_reads_it(raw_reply):
    async def main() -> tuple[tuple, tuple]:
        async with raw_server(answering(raw_reply, raw_reply, close_after=True)) as raw:
            async with ModelClient(raw.url, api_key="k") as lean, ModelClient(
                    raw.url, api_key="k", transport=httpx.AsyncHTTPTransport()) as core:
                assert lean._origin_pool is not None and core._origin_pool is None
                ours, theirs = await _send(lean), await _send(core)
                assert ours.request.content == theirs.request.content
                return _seen(ours), _seen(theirs)

    ours, theirs = asyncio.run(main())
    assert ours == theirs


def test_requests_in_turn_share_one_connection():
    async def main() -> int:
        async with raw_server(answering(OK, OK, OK)) as raw:
            async with ModelClient(raw.url) as client:
                for _ in range(3):
                    assert (await _send(client)).json()["choices"][0]["message"]["content"] == "hi"
            return raw.connections

    assert asyncio.run(main()) == 1


@pytest.mark.parametrize("last", [
    reply(headers=b"Connection: close\r\n"),
    reply().replace(b"HTTP/1.1", b"HTTP/1.0", 1),
    reply(headers=b"Connection: keep-alive\r\n").replace(b"HTTP/1.1", b"HTTP/1.0", 1),  # h11: its last too
], ids=["Connection: close", "HTTP/1.0", "HTTP/1.0 keep-alive"])
def test_a_reply_that_says_connection_close_or_speaks_http_1_0_is_its_connections_last(last):
    async def main() -> int:
        async with raw_server(answering(last, OK)) as raw:  # the server itself keeps it open
            async with ModelClient(raw.url) as client:
                await _send(client)
                await _send(client)
            return raw.connections

    assert asyncio.run(main()) == 2


def test_a_connection_the_server_closed_while_idle_is_not_used_again():
    async def main() -> tuple[int, int]:
        async with raw_server(answering(OK, OK, close_after=True)) as raw:  # says keep-alive, closes
            async with ModelClient(raw.url, max_retries=0) as client:
                first = await client.complete(model="m", messages=MESSAGES)
                await asyncio.sleep(0.05)  # the loop sees the server's FIN
                second = await client.complete(model="m", messages=MESSAGES)
            return first.attempts + second.attempts, raw.connections

    assert asyncio.run(main()) == (2, 2)


def test_bytes_the_server_sends_between_replies_retire_the_connection():
    async def main() -> int:
        async def handle(reader, writer, n):
            while await read_request(reader) is not None:
                writer.write(OK + (b"HTTP/1.1 408 Request Timeout\r\n\r\n" if n == 0 else b""))

        async with raw_server(lambda raw: handle) as raw:
            async with ModelClient(raw.url, max_retries=0) as client:
                await client.complete(model="m", messages=MESSAGES)
                await asyncio.sleep(0.05)
                await client.complete(model="m", messages=MESSAGES)
            return raw.connections

    assert asyncio.run(main()) == 2


def test_a_reused_connection_that_dies_before_the_reply_fails_as_under_httpx_and_the_client_retries():
    """Not sent again behind the client's back: a POST may have been read (and billed) before the
    connection died, so the retry is the client's, with its backoff and a new attempt number."""
    async def main() -> tuple[list[bytes], int, str]:
        async with raw_server(answering(OK, None, OK)) as raw:
            async with ModelClient(raw.url, backoff_s=0) as client:
                await client.complete(model="m", messages=MESSAGES)
                second = await client.complete(model="m", messages=MESSAGES)
                async with raw_server(answering(OK, None)) as again:
                    origin = Origin("127.0.0.1", again.port, httpx.Timeout(5).as_dict())
                    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
                    await origin.post(head, b"")
                    with pytest.raises(httpx.RemoteProtocolError) as raised:
                        await origin.post(head, b"")
                    await origin.aclose()
            attempts = [r.split(b"x-lab-attempt: ")[1].split(b"\r\n")[0] for r in raw.requests]
            return attempts, second.attempts, str(raised.value)

    attempts, tries, error = asyncio.run(main())
    assert (attempts, tries) == ([b"0", b"0", b"1"], 2)
    assert error == "Server disconnected without sending a response."


def _free_port() -> int:
    with socket.socket() as s:  # a port nothing listens on once this block closes it
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_provider_not_listening_is_a_connect_error_naming_its_address():
    port = _free_port()

    async def main() -> None:
        async with ModelClient(f"http://127.0.0.1:{port}/v1", max_retries=0) as client:
            assert client._origin_pool is not None
            await client.complete(model="m", messages=MESSAGES)

    with pytest.raises(ProviderError, match=f"ConnectError: .* \\(nothing accepts connections at "
                                            f"http://127.0.0.1:{port}\\)"):
        asyncio.run(main())


def test_a_connect_that_hangs_is_a_connect_timeout():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepted: once its queue is full, a new connection's SYN goes unanswered
        port = listener.getsockname()[1]
        queued = []
        try:
            for _ in range(4):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                queued.append(s)

            async def main() -> None:
                origin = Origin("127.0.0.1", port, httpx.Timeout(5, connect=0.2).as_dict())
                try:
                    await origin.post(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", b"")
                finally:
                    await origin.aclose()

            with pytest.raises(httpx.ConnectTimeout, match="within 0.2 s"):
                asyncio.run(main())
        finally:
            for s in queued:
                s.close()


def test_a_reply_that_stops_coming_is_a_read_timeout_per_read():
    async def main() -> None:
        async def handle(reader, writer, n):
            await read_request(reader)
            for part in (OK[:20], OK[20:40]):  # each within the read timeout, then nothing
                writer.write(part)
                await asyncio.sleep(0.15)
            await asyncio.sleep(10)

        async with raw_server(lambda raw: handle) as raw:
            async with ModelClient(raw.url, max_retries=0, timeout=httpx.Timeout(5, read=0.25)) as client:
                await client.complete(model="m", messages=MESSAGES)

    with pytest.raises(ProviderError, match="ReadTimeout: no byte of the reply for 0.25 s"):
        asyncio.run(main())


def test_a_server_that_takes_no_byte_of_the_request_is_a_write_timeout():
    # More than the most the kernel buffers on our side (its largest send buffer), with a
    # server whose receive buffer is small.
    body = b"x" * (int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2]) + 2**20)

    async def main() -> None:
        async def handle(reader, writer, n):
            await asyncio.sleep(10)  # reads nothing

        async with raw_server(lambda raw: handle, receive_buffer=4096) as raw:
            origin = Origin("127.0.0.1", raw.port, httpx.Timeout(5, write=0.3).as_dict())
            head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
            try:
                await origin.post(head, body)
            finally:
                await origin.aclose()

    with pytest.raises(httpx.WriteTimeout, match="took no byte of the request for 0.3 s"):
        asyncio.run(main())


BROKEN = {
    "closed mid-body": (OK[:-10], httpx.RemoteProtocolError, "before the reply ended"),
    "closed mid-head": (OK[:30], httpx.RemoteProtocolError, "before the reply ended"),
    "closed mid-chunk": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
                         httpx.RemoteProtocolError, "before the reply ended"),
    "not HTTP": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", httpx.RemoteProtocolError, "malformed reply"),
    "a bad header line": (b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", httpx.RemoteProtocolError,
                          "malformed reply"),
    "101 unasked": (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
                    httpx.RemoteProtocolError, "malformed reply"),
    "a head past the bound": (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (MAX_HEAD_BYTES + 1024),
                              httpx.RemoteProtocolError, f"over {MAX_HEAD_BYTES} bytes"),
}


@pytest.mark.parametrize(("sent", "error", "says"), BROKEN.values(), ids=BROKEN.keys())
def test_a_reply_cut_short_or_malformed_is_httpxs_protocol_error(sent, error, says):
    async def main() -> None:
        async def handle(reader, writer, n):
            await read_request(reader)
            writer.write(sent)
            await writer.drain()
            if b"X-Long" in sent:  # the head goes on: the client must stop reading, not wait for its end
                await asyncio.sleep(10)

        async with raw_server(lambda raw: handle) as raw:
            origin = Origin("127.0.0.1", raw.port, httpx.Timeout(5).as_dict())
            try:
                await origin.post(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", b"")
            finally:
                await origin.aclose()

    with pytest.raises(error, match=says):
        asyncio.run(main())


def test_a_trickled_reply_is_still_cut_off_at_the_attempt_deadline():
    async def main() -> None:
        async def handle(reader, writer, n):
            while await read_request(reader) is not None:
                for i in range(len(OK)):
                    writer.write(OK[i:i + 1])
                    await asyncio.sleep(0.02)

        async with raw_server(lambda raw: handle) as raw:
            async with ModelClient(raw.url, backoff_s=0, max_retries=1, deadline_s=0.3) as client:
                await client.complete(model="m", messages=MESSAGES)

    with pytest.raises(ProviderError, match="gave up after 2 attempts: no complete reply within the 0.3 s"):
        asyncio.run(main())


def test_a_request_cancelled_mid_way_closes_its_connection_and_the_next_one_works(mock_url):
    async def main() -> None:
        async with ModelClient(mock_url) as client:
            await client.complete(model="plan", messages=MESSAGES)
            origin = client._origin_pool
            assert origin is not None and len(origin._idle) == 1
            (kept,) = origin._idle
            cancel = Cancel()
            asyncio.get_running_loop().call_later(0.1, cancel.set, "user pressed Stop")
            with pytest.raises(Cancelled):
                await client.complete(model="plan", messages=MESSAGES, cancel=cancel,
                                      headers={"x-mock-options": "latency=500"})
            assert kept.dead and kept.transport.is_closing()
            assert origin._idle == [] and not origin._busy
            again = await client.complete(model="plan", messages=MESSAGES)
            assert again.attempts == 1 and origin._idle[0] is not kept

    asyncio.run(main())


def test_concurrent_requests_each_take_a_connection_of_their_own():
    async def main() -> tuple[int, set[int]]:
        peers: set[int] = set()
        both = asyncio.Event()

        async def handle(reader, writer, n):
            while await read_request(reader) is not None:
                peers.add(writer.get_extra_info("peername")[1])
                if len(peers) == 2:
                    both.set()
                await asyncio.wait_for(both.wait(), 5)  # neither answers until both arrived
                writer.write(OK)

        async with raw_server(lambda raw: handle) as raw:
            async with ModelClient(raw.url, max_retries=0) as client:
                two = [client.complete(model="m", messages=MESSAGES) for _ in range(2)]
                done = await asyncio.gather(*two)
                assert [c.message["content"] for c in done] == ["hi", "hi"]
                assert len(client._origin_pool._idle) == 2
            return raw.connections, peers

    connections, peers = asyncio.run(main())
    assert connections == 2 and len(peers) == 2


def test_aclose_closes_the_connections_and_a_closed_client_refuses_as_before():
    async def main() -> None:
        eof = asyncio.Event()

        async def handle(reader, writer, n):
            while await read_request(reader) is not None:
                writer.write(OK)
            eof.set()

        async with raw_server(lambda raw: handle) as raw:
            client = ModelClient(raw.url, max_retries=0)
            await client.complete(model="m", messages=MESSAGES)
            await client.aclose()
            await asyncio.wait_for(eof.wait(), 5)  # the server saw the connection end
            with pytest.raises(RuntimeError, match="client has been closed"):
                await client.complete(model="m", messages=MESSAGES)

    asyncio.run(main())


def test_a_cookie_set_over_our_connections_goes_back_through_httpx():
    async def main() -> list[bytes]:
        async with raw_server(answering(reply(headers=b"Set-Cookie: lb=node-3; Path=/\r\n"), OK)) as raw:
            async with ModelClient(raw.url, max_retries=0) as client:
                await client.complete(model="m", messages=MESSAGES)
                await client.complete(model="m", messages=MESSAGES)
            return raw.requests

    first, second = asyncio.run(main())
    assert b"\r\ncookie:" not in first.lower() and b"\r\nCookie: lb=node-3\r\n" in second


def test_a_retry_after_on_our_connections_is_read():
    async def main() -> None:
        slow = reply(b'{"error":{"message":"slow down"}}', status=b"429 Too Many Requests",
                     headers=b"retry-after-ms: 3000\r\n")
        async with raw_server(answering(slow)) as raw:
            async with ModelClient(raw.url, max_wait_s=1) as client:
                await client.complete(model="m", messages=MESSAGES)

    with pytest.raises(ProviderError, match="slow down \\(asked to retry after 3 s, more than max_wait_s"):
        asyncio.run(main())


def test_a_loop_closed_right_after_aclose_finds_no_socket_left_open(mock_url):
    """aclose closes every socket: one left open is a ResourceWarning, an error in this suite."""
    loop = asyncio.new_event_loop()

    async def main() -> None:
        client = ModelClient(mock_url)
        await asyncio.gather(*(client.complete(model="plan", messages=MESSAGES) for _ in range(3)))
        await client.aclose()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    gc.collect()


def test_a_reset_in_a_body_that_runs_until_the_close_is_a_read_error_not_its_end():
    async def main() -> None:
        async def handle(reader, writer, n):
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npart of it")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                       struct.pack("ii", 1, 0))
            writer.transport.abort()  # with no linger: a reset, not an orderly close

        async with raw_server(lambda raw: handle) as raw:
            origin = Origin("127.0.0.1", raw.port, httpx.Timeout(5).as_dict())
            try:
                await origin.post(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", b"")
            finally:
                await origin.aclose()

    with pytest.raises(httpx.ReadError):
        asyncio.run(main())


def test_a_request_beyond_the_connection_limit_waits_its_pool_timeout(monkeypatch):
    monkeypatch.setattr(http1, "MAX_CONNECTIONS", 1)

    async def main() -> None:
        async def handle(reader, writer, n):
            await read_request(reader)
            await asyncio.sleep(10)  # holds the one connection

        async with raw_server(lambda raw: handle) as raw:
            origin = Origin("127.0.0.1", raw.port, httpx.Timeout(5, pool=0.2).as_dict())
            head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
            first = asyncio.ensure_future(origin.post(head, b""))
            await asyncio.sleep(0.05)
            try:
                await origin.post(head, b"")
            finally:
                first.cancel()
                await asyncio.gather(first, return_exceptions=True)
                await origin.aclose()

    with pytest.raises(httpx.PoolTimeout, match="all 1 connections stayed busy for 0.2 s"):
        asyncio.run(main())


def test_idle_connections_are_kept_up_to_the_limit_and_for_the_expiry(monkeypatch):
    monkeypatch.setattr(http1, "MAX_IDLE", 1)
    monkeypatch.setattr(http1, "IDLE_EXPIRY_S", 0.2)

    async def main() -> tuple[int, int, int]:
        async with raw_server(answering(*[OK] * 5)) as raw:
            async with ModelClient(raw.url, max_retries=0) as client:
                await asyncio.gather(*(client.complete(model="m", messages=MESSAGES) for _ in range(2)))
                kept = len(client._origin_pool._idle)
                await client.complete(model="m", messages=MESSAGES)  # on the one kept
                reused = raw.connections
                await asyncio.sleep(0.3)
                await client.complete(model="m", messages=MESSAGES)  # past the expiry: a new one
            return kept, reused, raw.connections

    assert asyncio.run(main()) == (1, 2, 3)


def test_a_corrupt_gzip_reply_is_a_malformed_body_retried_then_a_provider_error():
    corrupt = reply(b"\x1f\x8b\x08\x00not gzip at all", headers=b"Content-Encoding: gzip\r\n")

    async def main() -> ProviderError:
        async with raw_server(answering(corrupt, corrupt)) as raw:
            async with ModelClient(raw.url, max_retries=1, backoff_s=0) as client:
                with pytest.raises(ProviderError) as caught:
                    await client.complete(model="m", messages=MESSAGES)
                return caught.value

    error = asyncio.run(main())
    assert "gave up after 2 attempts" in str(error) and "DecodingError" in str(error)
