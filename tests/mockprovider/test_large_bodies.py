"""A large body is served off the server's event loop: `/healthz` keeps answering meanwhile, and
the request is answered as on the loop (its per-test set-up, its journal entry, in order)."""

from __future__ import annotations

import contextvars
import dataclasses
import json
import threading

import httpx
import pytest
from list_fields import FIELDS, p99_while_every_field_is_served
from mock_support import P99_BOUND_S

from mockprovider import create_app
from mockprovider.offload import LARGE_BYTES
from mockprovider.scripts.scenarios import Conversation, Reply
from mockprovider.server import serve_in_thread

JSON = {"content-type": "application/json"}
LARGE = "the quick brown fox " * (2 * LARGE_BYTES // 20)
SURFACES = {
    "chat": ("/v1/chat/completions", lambda text: {"model": "where", "messages": [
        {"role": "user", "content": text}]}),
    "messages": ("/v1/messages", lambda text: {"model": "where", "max_tokens": 50, "messages": [
        {"role": "user", "content": text}]}),
    "gemini": ("/v1beta/models/where:generateContent", lambda text: {"contents": [
        {"role": "user", "parts": [{"text": text}]}]}),
}
REQUEST = contextvars.ContextVar("request", default="unset")


def _where(c: Conversation) -> Reply:
    """Answers with the thread it runs on and the context variable its request was sent with."""
    return Reply(content=f"{threading.current_thread().name} {REQUEST.get()}")


def _in_context(app):
    """`app`, with REQUEST set to the request's `x-request-name` header: state a request carries
    in its context when it reaches the mock (as a server or middleware sets it)."""

    async def asgi(scope, receive, send):
        if scope["type"] == "http":
            REQUEST.set(dict(scope["headers"]).get(b"x-request-name", b"unset").decode())
        await app(scope, receive, send)

    return asgi


@pytest.fixture
def mock():
    app = create_app(journal=10)
    app.state.config = dataclasses.replace(app.state.config, scenarios={"where": _where})
    with serve_in_thread(_in_context(app)) as url:
        yield app, url.removesuffix("/v1")


def _said(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    if "choices" in body:
        return body["choices"][0]["message"]["content"]
    if "candidates" in body:
        return body["candidates"][0]["content"]["parts"][0]["text"]
    return body["content"][0]["text"]


@pytest.mark.parametrize("surface", SURFACES)
def test_a_large_body_is_served_off_the_loop_in_its_request_context_and_a_small_one_on_it(mock, surface):
    app, root = mock
    path, body = SURFACES[surface]
    with httpx.Client(base_url=root) as client:
        small = _said(client.post(path, json=body("hi"), headers={"x-request-name": "small"}))
        large = _said(client.post(path, json=body(LARGE), headers={"x-request-name": "large"}))
        chunked = _said(client.post(path, content=iter([json.dumps(body(LARGE)).encode()]),
                                    headers={**JSON, "x-request-name": "chunked"}))
    assert not small.startswith("mock-large-bodies") and small.endswith(" small")
    assert large == "mock-large-bodies large" and chunked == "mock-large-bodies chunked"
    journalled = [e.headers["x-request-name"] for e in app.state.config.journal.entries()]
    assert journalled == ["small", "large", "chunked"]


def test_a_large_body_gets_its_tests_own_set_up_and_streams_as_a_small_one(mock):
    app, root = mock
    own = {"where": lambda c: Reply(content="t1")}
    app.state.tests["t1"] = dataclasses.replace(app.state.config, scenarios=own)
    body = {"model": "where", "stream": True, "messages": [{"role": "user", "content": LARGE}]}
    with httpx.Client(base_url=root) as client:
        streamed = client.post("/v1/chat/completions", json=body, headers={"x-test-id": "t1"})
    assert streamed.status_code == 200
    events = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1]) == "t1"

ITEMS = 100_000


@pytest.mark.slow
def test_healthz_keeps_answering_while_100k_item_bodies_of_every_format_are_served():
    p99, probes, answered = p99_while_every_field_is_served(ITEMS)
    assert answered == [(field, 200) for field in FIELDS]
    assert p99 < P99_BOUND_S, f"/healthz p99 {p99 * 1000:.0f} ms over {probes} probes"
