"""Work for a client that has gone is dropped; large prompts are counted off the event loop."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

import o200k
from mockprovider import transcript
from mockprovider.server import serve_in_thread

USER = {"role": "user", "content": "Which file mentions a timeout?"}


class Events(logging.Handler):
    """Sets an event when the mock logs a line containing a given text."""

    def __init__(self, *texts: str) -> None:
        super().__init__(level=logging.INFO)
        self.seen = {text: threading.Event() for text in texts}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for text, event in self.seen.items():
            if text in message:
                event.set()


@pytest.fixture
def events() -> Iterator[Events]:
    handler = Events("turn=0 attempt=0", "dropped")
    log = logging.getLogger("mockprovider")
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """The length of every transcript the mock counts (the hook is the counting step itself)."""
    calls: list[int] = []
    original = transcript.prompt_tokens

    async def recording(t, tools):
        calls.append(len(t.messages))
        return await original(t, tools)

    monkeypatch.setattr(transcript, "prompt_tokens", recording)
    return calls


def _post_raw(url: str, body: dict) -> socket.socket:
    """Send a chat request on a raw socket and return the socket without reading the answer."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    head = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection((parts.hostname, parts.port))
    sock.sendall(head + data)
    return sock


def test_a_client_that_leaves_during_the_latency_is_never_counted(events, counted):
    with serve_in_thread() as url:
        sent = time.monotonic()
        sock = _post_raw(url, {"model": "plan+latency=3000", "messages": [USER]})
        assert events.seen["turn=0 attempt=0"].wait(10), "the request never reached the latency wait"
        sock.close()
        assert events.seen["dropped"].wait(10), "the mock never noticed the client had gone"
        # Noticed during the wait, not after it: the 3 s latency had not run out.
        assert time.monotonic() - sent < 3.0
        assert counted == []
        # The control: the same request from a client that stays is answered and counted.
        with httpx.Client(base_url=url) as client:
            response = client.post("/chat/completions", json={"model": "plan+latency=50", "messages": [USER]})
        assert response.status_code == 200 and counted == [1]


def test_a_large_prompt_is_counted_on_a_worker_thread_and_exactly(monkeypatch):
    threads: list[str] = []
    original = o200k.message_tokens

    def recording(message):
        threads.append(threading.current_thread().name)
        return original(message)

    monkeypatch.setattr(o200k, "message_tokens", recording)
    small = [USER]
    large = [{"role": "user", "content": "the quick brown fox " * (transcript.OFFLOAD_CHARS // 10)}]
    with serve_in_thread() as url, httpx.Client(base_url=url) as client:
        for messages in (small, large):
            response = client.post("/chat/completions", json={"model": "plan", "messages": messages})
            assert response.status_code == 200, response.text
            assert response.json()["usage"]["prompt_tokens"] == o200k.prompt_tokens(messages)
    server_side = [name for name in threads if name != threading.main_thread().name]
    assert len(server_side) == 2
    assert not server_side[0].startswith("o200k") and server_side[1].startswith("o200k")
