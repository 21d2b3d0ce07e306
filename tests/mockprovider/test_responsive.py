"""Work for a client that has gone is dropped; large prompts are counted off the event loop.

New text up to `transcript.INLINE_CHARS` is counted as it is read (microseconds, mostly cached
counts); the encoding past it is what waits for the latency and runs on a worker thread.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

import o200k
from mockprovider.reading import transcript
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
def encoded(monkeypatch) -> list[int]:
    """The length of every long text the mock encodes (the hook is the encoder call itself)."""
    calls: list[int] = []
    original = o200k._encode_len

    def recording(text: str) -> int:
        calls.append(len(text))
        return original(text)

    monkeypatch.setattr(o200k, "_encode_len", recording)
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


def test_a_large_prompt_from_a_client_that_leaves_during_the_latency_is_never_encoded(events, encoded):
    large = {"role": "user", "content": "left before the answer " * (transcript.INLINE_CHARS // 10)}
    with serve_in_thread() as url:
        sent = time.monotonic()
        sock = _post_raw(url, {"model": "plan+latency=3000", "messages": [large]})
        assert events.seen["turn=0 attempt=0"].wait(10), "the request never reached the latency wait"
        sock.close()
        assert events.seen["dropped"].wait(10), "the mock never noticed the client had gone"
        # Noticed during the wait, not after it: the 3 s latency had not run out.
        assert time.monotonic() - sent < 3.0
        assert len(large["content"]) not in encoded
        # The control: the same request from a client that stays is answered and encoded once.
        with httpx.Client(base_url=url) as client:
            body = {"model": "plan+latency=50", "messages": [large]}
            response = client.post("/chat/completions", json=body)
        assert response.status_code == 200
        assert encoded.count(len(large["content"])) == 1
        assert response.json()["usage"]["prompt_tokens"] == o200k.prompt_tokens([large])


def test_a_client_that_leaves_before_its_body_arrives_is_dropped(events):
    with serve_in_thread() as url:
        parts = urlsplit(url)
        head = (
            f"POST {parts.path}/chat/completions HTTP/1.1\r\nhost: {parts.netloc}\r\n"
            "content-type: application/json\r\ncontent-length: 1000\r\n\r\n"
        ).encode()
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            sock.sendall(head + b'{"model": "plan", "mess')  # 977 bytes short
        assert events.seen["dropped"].wait(10), "the mock never noticed the client had gone"
        with httpx.Client(base_url=url) as client:  # and it still serves the next one
            response = client.post("/chat/completions", json={"model": "plan", "messages": [USER]})
        assert response.status_code == 200


@pytest.fixture
def counting_threads(monkeypatch) -> list[str]:
    """The name of the thread of each message count (`o200k.fields_tokens` call), in order."""
    threads: list[str] = []
    original = o200k.fields_tokens

    def recording(*fields):
        threads.append(threading.current_thread().name)
        return original(*fields)

    monkeypatch.setattr(o200k, "fields_tokens", recording)
    return threads


def test_a_large_prompt_is_counted_on_a_worker_thread_and_exactly(counting_threads):
    threads = counting_threads
    small = [{"role": "user", "content": f"Which file mentions a timeout? ({uuid.uuid4()})"}]  # uncached
    large = [{"role": "user", "content": "the quick brown fox " * (transcript.INLINE_CHARS // 10)}]
    with serve_in_thread() as url, httpx.Client(base_url=url) as client:
        for messages in (small, large):
            response = client.post("/chat/completions", json={"model": "plan", "messages": messages})
            assert response.status_code == 200, response.text
            assert response.json()["usage"]["prompt_tokens"] == o200k.prompt_tokens(messages)
    server_side = [name for name in threads if name != threading.main_thread().name]
    assert len(server_side) == 2
    assert not server_side[0].startswith("o200k") and server_side[1].startswith("o200k")


LONG = "the quick brown fox " * (transcript.INLINE_CHARS // 10)


@pytest.mark.parametrize("call_id", [LONG, ["a fox"] * 20_000])
def test_a_large_tool_call_id_on_a_non_tool_message_is_counted_on_a_worker_thread(counting_threads, call_id):
    """Not checked on other roles than 'tool', but counted on all of them: its size counts too."""
    threads = counting_threads
    messages = [{"role": "user", "content": "hi", "tool_call_id": call_id}]
    with serve_in_thread() as url, httpx.Client(base_url=url) as client:
        response = client.post("/chat/completions", json={"model": "plan", "messages": messages})
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["prompt_tokens"] == o200k.prompt_tokens(messages)
    server_side = [name for name in threads if name != threading.main_thread().name]
    assert len(server_side) == 1 and server_side[0].startswith("o200k"), server_side


@pytest.mark.parametrize(
    ("path", "body", "prompt_tokens"),
    [
        ("/v1/responses", {"model": "plan", "input": LONG}, lambda r: r["usage"]["input_tokens"]),
        ("/v1/messages", {"model": "plan", "max_tokens": 50, "messages": [{"role": "user", "content": LONG}]},
         lambda r: r["usage"]["input_tokens"]),
        ("/v1beta/models/plan:generateContent", {"contents": [{"role": "user", "parts": [{"text": LONG}]}]},
         lambda r: r["usageMetadata"]["promptTokenCount"]),
        ("/api/chat", {"model": "plan", "stream": False, "messages": [{"role": "user", "content": LONG}]},
         lambda r: r["prompt_eval_count"]),
        ("/model/plan/converse", {"messages": [{"role": "user", "content": [{"text": LONG}]}]},
         lambda r: r["usage"]["inputTokens"]),
    ],
    ids=["responses", "messages", "gemini", "ollama", "bedrock"],
)
def test_a_large_prompt_in_another_wire_format_is_counted_on_a_worker_thread(
    counting_threads, path, body, prompt_tokens
):
    """Every other format's translated conversation is read and counted as the chat route's is:
    a large one off the event loop, so it never blocks other requests."""
    threads = counting_threads
    with serve_in_thread() as url, httpx.Client(base_url=url.removesuffix("/v1")) as client:
        response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    assert prompt_tokens(response.json()) == o200k.prompt_tokens([{"role": "user", "content": LONG}])
    server_side = [name for name in threads if name != threading.main_thread().name]
    assert server_side and all(name.startswith("o200k") for name in server_side), server_side


CALL = {"id": "call_1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "plan", "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": LONG}]}),
        ("/v1/responses", {"model": "plan", "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "call_1", "name": "list_files", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": LONG}]}),
        ("/v1/messages", {"model": "plan", "max_tokens": 50, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "list_files", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": LONG,
                                          "cache_control": {"type": "ephemeral"}}]}]}),
        ("/model/plan/converse", {"messages": [
            {"role": "user", "content": [{"text": "hi"}]},
            {"role": "assistant", "content": [
                {"toolUse": {"toolUseId": "call_1", "name": "list_files", "input": {}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "call_1", "content": [{"text": LONG}]}},
                                         {"cachePoint": {"type": "default"}}]}]}),
    ],
    ids=["chat", "responses", "messages", "bedrock"],
)
def test_a_large_tool_result_is_never_counted_on_the_event_loop_for_the_cache_either(monkeypatch, path, body):
    """The cache rules count the messages since the previous turn (OpenAI) or up to each
    breakpoint (Anthropic): a large tool result among them is counted on a worker thread too."""
    counted: list[tuple[str, int]] = []
    original = o200k.fields_tokens

    def recording(*fields):
        counted.append((threading.current_thread().name, sum(len(f) for f in fields if isinstance(f, str))))
        return original(*fields)

    monkeypatch.setattr(o200k, "fields_tokens", recording)
    with serve_in_thread() as url, httpx.Client(base_url=url.removesuffix("/v1")) as client:
        response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    large = [thread for thread, chars in counted if chars >= len(LONG)]
    assert large and all(thread.startswith("o200k") for thread in large), large
