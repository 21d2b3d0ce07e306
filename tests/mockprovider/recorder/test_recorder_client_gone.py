"""A client that leaves the recorder mid-reply takes the upstream request with it: the recorder
closes its connection to the upstream at once (never reading a slow upstream for nobody), and a
reply it did not see whole is not recorded."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mockprovider.recorder import record

TICK_S = 0.1
GONE = "not recorded: the client left before the reply was whole"
DELTA = {"role": "assistant", "content": "Hel"}
FIRST_EVENT = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": DELTA, "finish_reason": None}]}


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class Trickle:
    """An upstream on loopback as slow as a model on a CPU: it answers one request with its
    headers, then a whole reply's body a byte every TICK_S, or a stream's first event and then
    nothing (a long think before the next token), for as long as its connection stays open.
    `asked` is set once the request came, `closed` once the other side closed the connection."""

    def __init__(self, *, streamed: bool) -> None:
        self.streamed = streamed
        self.asked, self.closed = threading.Event(), threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:
                received += conn.recv(65536)
            self.asked.set()
            if self.streamed:
                event = b"data: " + json.dumps(FIRST_EVENT).encode() + b"\n\n"
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n" + _chunk(event))
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 100000\r\n\r\n{")
            conn.settimeout(TICK_S)
            for _ in range(int(60 / TICK_S)):
                try:
                    if conn.recv(1) == b"":
                        break
                except TimeoutError:
                    pass
                try:
                    if not self.streamed:
                        conn.sendall(b" ")
                except OSError:
                    break
            else:
                return  # held for a minute: never closed
            self.closed.set()

    def stop(self) -> None:
        self.listener.close()


@pytest.fixture(params=[True, False], ids=["streamed", "whole"])
def upstream(request) -> Iterator[Trickle]:
    trickle = Trickle(streamed=request.param)
    yield trickle
    trickle.stop()


def test_a_client_that_leaves_closes_the_upstream_request_and_nothing_is_recorded(upstream, tmp_path: Path):
    out = tmp_path / "left.json"
    body = json.dumps({"model": "m", "stream": upstream.streamed,
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    with record(upstream.url, out) as proxy:
        parts = urlsplit(proxy.base_url)
        with socket.create_connection((parts.hostname, parts.port)) as client:
            client.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: "
                           f"application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode() + body)
            assert upstream.asked.wait(10), "the request never reached the upstream"
            seen = b""
            while upstream.streamed and b"Hel" not in seen:
                assert (more := client.recv(65536)), "the first event never reached the client"
                seen += more
        assert upstream.closed.wait(5), "the recorder went on reading the upstream after its client left"
        deadline = time.monotonic() + 5  # the line is logged once the closed request has unwound
        while not any(GONE in line for line in proxy.log) and time.monotonic() < deadline:
            time.sleep(0.01)
        log = "\n".join(proxy.log)
    assert "recorded turn" not in log
    assert GONE in log
    assert not out.exists() or json.loads(out.read_text()).get("turns", []) == []
