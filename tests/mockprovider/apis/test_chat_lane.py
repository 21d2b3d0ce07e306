"""`POST /v1/chat/completions` skips the router (apis.chat.ChatLane) and answers as if it had not."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from openai import InternalServerError, OpenAI
from starlette.testclient import TestClient

import o200k
from experiments.bench import trick_protocol
from experiments.bench.floor import request_body
from experiments.bench.trick_protocol import chat_request
from mockprovider.apis import chat
from mockprovider.app import create_app
from mockprovider.reading import memo
from mockprovider.replies.faults import log as faults_log
from mockprovider.server import serve_in_thread

MESSAGES = [{"role": "user", "content": "Which file mentions a timeout?"}]
TOOLS = [{"type": "function", "function": {"name": "list_files"}}]


def test_an_unexpected_error_in_the_chat_endpoint_is_an_openai_shaped_500(monkeypatch):
    def broken(completion):
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat, "render", broken)
    with serve_in_thread() as url, OpenAI(base_url=url, api_key="k", max_retries=0) as client:
        with pytest.raises(InternalServerError) as raised:
            client.chat.completions.create(model="plan", messages=MESSAGES)
    assert raised.value.status_code == 500
    assert raised.value.body["type"] == "server_error" and "RuntimeError" in raised.value.body["message"]


@pytest.mark.parametrize(
    ("root_path", "path"),
    [
        ("", "/v1/chat/completions"),  # the lane
        ("/proxy", "/proxy/v1/chat/completions"),  # behind a proxy's prefix: the router
        ("", "/o/latency=0/v1/chat/completions"),  # options in the path: the router
    ],
)
def test_a_chat_request_is_answered_alike_by_the_lane_and_by_the_router(root_path, path):
    with TestClient(create_app(), root_path=root_path) as client:
        ok = client.post(path, json={"model": "plan", "messages": MESSAGES, "tools": TOOLS})
        bad = client.post(path, json={"model": "plan", "messages": []})
        unknown = client.post(path, json={"model": "nope", "messages": MESSAGES})
    assert ok.status_code == 200 and ok.headers["content-type"] == "application/json"
    assert ok.json()["usage"]["prompt_tokens"] == o200k.prompt_tokens(MESSAGES, TOOLS)
    assert ok.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "list_files"
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "messages"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    for reply in (ok, bad, unknown):  # the real API's headers, whichever way the request went
        assert reply.headers["x-request-id"].startswith("req_")
        assert reply.headers["openai-processing-ms"].isdigit()
        assert reply.headers["x-ratelimit-remaining-tokens"] == reply.headers["x-ratelimit-limit-tokens"]
        assert reply.headers["x-ratelimit-reset-requests"] == "0s"
    assert len({r.headers["x-request-id"] for r in (ok, bad, unknown)}) == 3


def test_a_reply_on_the_lane_carries_the_limits_its_options_script():
    body = {"model": "plan+ratelimit=60:1000+remaining=5:20", "messages": MESSAGES}
    with TestClient(create_app()) as client:
        plain = client.post("/v1/chat/completions", json=body)
        streamed = client.post("/v1/chat/completions", json={**body, "stream": True})
    for reply in (plain, streamed):
        assert reply.status_code == 200
        assert reply.headers["x-ratelimit-limit-requests"] == "60"
        assert reply.headers["x-ratelimit-remaining-tokens"] == "20"
        assert reply.headers.get_list("x-request-id") == [reply.headers["x-request-id"]]


def test_a_deeply_nested_body_is_answered_alike_by_the_lane_and_by_the_router():
    # Around the documented depth bound, and where the parser's own recursion limit falls.
    answers = set()
    with TestClient(create_app()) as client:
        for depth in [*range(58, 66), *range(900, 1000, 2)]:
            extra = b"[" * depth + b"]" * depth
            body = b'{"model":"plan","messages":[{"role":"user","content":"hi"}],"x":' + extra + b"}"
            for path in ("/v1/chat/completions", "/o/latency=0/v1/chat/completions"):
                response = client.post(path, content=body, headers={"content-type": "application/json"})
                answers.add((depth, response.status_code))
    assert len(answers) == len({depth for depth, _ in answers})


PATHS = ["/v1/chat/completions", "/o/latency=0/v1/chat/completions"]
"""The lane's path, and the router's."""


@pytest.mark.parametrize("path", PATHS)
def test_a_crash_after_a_chat_stream_started_reaches_the_mocks_log(path, monkeypatch, caplog):
    async def breaks_midway(completion, req, options):
        yield b'data: {"choices": []}\n\n'
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat, "_stream", breaks_midway)
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        client.post(path, json={"model": "plan", "messages": MESSAGES, "stream": True})
    logged = [r.exc_info[0] for r in caplog.records if r.name == "mockprovider" and r.exc_info]
    assert logged == [RuntimeError]


@pytest.mark.parametrize("path", PATHS)
def test_middleware_the_user_adds_sees_the_chat_request_too(path):
    from starlette.middleware.cors import CORSMiddleware

    app = create_app()
    app.add_middleware(CORSMiddleware, allow_origins=["*"])
    with TestClient(app) as client:
        reply = client.post(path, json={"model": "plan", "messages": MESSAGES},
                            headers={"origin": "http://agent.test"})
    assert reply.status_code == 200 and reply.headers["access-control-allow-origin"] == "*"


def test_a_crash_behind_a_root_path_holding_api_is_still_openai_shaped(monkeypatch):
    # A proxy's prefix is no part of the route: '/api' in it does not make the reply Ollama's.
    def broken(completion):
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat, "render", broken)
    with TestClient(create_app(), raise_server_exceptions=False, root_path="/api") as client:
        reply = client.post("/api/v1/chat/completions", json={"model": "plan", "messages": MESSAGES})
    assert reply.status_code == 500 and reply.json()["error"]["type"] == "server_error"
    assert reply.headers["x-request-id"].startswith("req_")


class _ByHand:
    """An app on the mock's own server connection, driven by hand: `send` feeds it bytes from the
    loop, not from a task, as a socket's come (the chat lane's reply is then written before
    `data_received` returns), and runs the loop until the request is done; `at_once`, whether the
    last reply was written with no task, no turn of the loop."""

    def __init__(self, app) -> None:
        self.loop = asyncio.new_event_loop()
        self.connection, self.transport = trick_protocol.connection(app, self.loop)
        self.at_once = False

    def send(self, request: bytes) -> bytes:
        self.transport.writes.clear()

        def feed() -> None:
            self.connection.data_received(request)
            self.at_once = bool(self.transport.writes)

        self.loop.call_soon(feed)
        self.loop.run_until_complete(asyncio.sleep(0.05))
        return b"".join(self.transport.writes)


def _remembered(monkeypatch, transport) -> list[tuple[int, bool, bool]]:
    """Each transcript the memory is given: its messages, whether it extends one remembered, and
    whether its reply had been written by then."""
    seen = []
    remember = memo.MEMORY.remember

    def noted(entry, replaces=None):
        seen.append((len(entry.messages), replaces is not None, bool(transport.writes)))
        remember(entry, replaces)

    monkeypatch.setattr(memo.MEMORY, "remember", noted)
    return seen


@pytest.mark.parametrize("app", [trick_protocol.lane_only(create_app()), create_app()],
                         ids=["the lane", "answered at once"])
def test_a_transcript_is_remembered_once_its_reply_is_written_and_the_next_turn_reads_it(monkeypatch, app):
    """The client has its answer before the memory's step is taken; the next turn still extends
    what the turn before it remembered. So on the lane and where the request is answered at once."""
    memo.MEMORY.clear()
    hand = _ByHand(app)
    send, transport, loop = hand.send, hand.transport, hand.loop
    seen = _remembered(monkeypatch, transport)
    try:
        for turn in (10, 11):
            assert send(chat_request(request_body(turn, task="later"))).startswith(
                b"HTTP/1.1 200 OK")
    finally:
        loop.close()
    assert seen == [(22, False, True), (24, True, True)]


def test_with_the_request_log_on_a_chat_reply_is_still_written_at_once_and_logged(caplog):
    """`python -m mockprovider` logs a line per chat request by default; that line alone waits for
    nothing, so the request needs no task (a fault or a latency does)."""
    hand = _ByHand(create_app())
    send, loop = hand.send, hand.loop
    try:
        with caplog.at_level(logging.INFO, logger=faults_log.name):
            plain = send(chat_request(request_body(1, task="logged")))
            at_once = hand.at_once
            late = send(chat_request(json.dumps(
                {**json.loads(request_body(1, task="late")), "model": "runaway+latency=1"}).encode()))
    finally:
        loop.close()
    assert plain.startswith(b"HTTP/1.1 200 OK") and at_once
    assert late.startswith(b"HTTP/1.1 200 OK") and not hand.at_once
    assert [r.getMessage() for r in caplog.records if r.name == faults_log.name] == [
        "model=runaway turn=1 attempt=0 status=ok", "model=runaway+latency=1 turn=1 attempt=0 status=ok"]


def test_a_streamed_reply_remembers_its_transcript_as_it_is_counted(monkeypatch):
    """A stream's last bytes leave the loop a turn before the lane ends, time enough for the next
    request to come: its transcript is remembered before the reply, as behind the router."""
    memo.MEMORY.clear()
    hand = _ByHand(create_app())
    send, transport, loop = hand.send, hand.transport, hand.loop
    seen = _remembered(monkeypatch, transport)
    body = json.loads(request_body(10, task="streamed"))
    try:
        streamed = send(chat_request(json.dumps({**body, "stream": True}).encode()))
    finally:
        loop.close()
    assert streamed.startswith(b"HTTP/1.1 200 OK") and streamed.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
    assert seen == [(22, False, False)]


def test_behind_the_router_and_after_a_crash_a_transcript_is_remembered_all_the_same(monkeypatch):
    """Where the lane does not serve (an options prefix) the transcript is remembered as it is
    counted; where its reply fails after the count (a 500), once the lane is done with it."""
    memo.MEMORY.clear()
    hand = _ByHand(create_app())
    send, transport, loop = hand.send, hand.transport, hand.loop
    seen = _remembered(monkeypatch, transport)

    def broken(completion):
        raise RuntimeError("a bug")

    try:
        routed = send(chat_request(request_body(10, task="routed"), b"/o/latency=0/v1/chat/completions"))
        monkeypatch.setattr(chat, "render", broken)
        crashed = send(chat_request(request_body(10, task="crashed")))
    finally:
        loop.close()
    assert routed.startswith(b"HTTP/1.1 200 OK")
    assert crashed.startswith(b"HTTP/1.1 500") and b'"type":"server_error"' in crashed
    assert seen == [(22, False, False), (22, False, True)]
