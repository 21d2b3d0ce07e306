"""One documented nesting bound for request bodies, in every wire format (five): every depth from 1 to
2,000, step 1, is answered 200 up to `MAX_DEPTH` and with the format's own 400 past it, never a
500 or a reset connection, and the server keeps serving.

The nesting sits where the hostile requests put it, in a tool's `parameters` / `input_schema`
(which the token counter walks and the Responses API echoes), and in a field no reader looks at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from mockprovider.reading.validation import MAX_DEPTH
from mockprovider.server import serve_in_thread

DEPTHS = range(1, 2001)
HEADERS = {"content-type": "application/json"}
HOLE = '"@nest@"'


def _nested(levels: int) -> str:
    """JSON text of `levels` objects, each inside the last (built as text: json.dumps recurses)."""
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


def _depth(text: str) -> int:
    """How deep `text` nests arrays and objects (its strings hold no brackets): the oracle."""
    deepest = level = 0
    for char in text:
        if char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


QUESTION = {"role": "user", "content": "Which file mentions a timeout?"}
FORMATS: dict[str, tuple[str, dict]] = {
    "chat_tools": ("/v1/chat/completions", {
        "model": "plan", "messages": [QUESTION],
        "tools": [{"type": "function", "function": {"name": "list_files", "parameters": "@nest@"}}],
    }),
    "chat_unread_field": ("/v1/chat/completions", {
        "model": "plan", "messages": [QUESTION], "x_unread": "@nest@",  # no reader looks at it
        "tools": [{"type": "function", "function": {"name": "list_files"}}],
    }),
    "responses_tools": ("/v1/responses", {
        "model": "plan", "input": "Which file?",
        "tools": [{"type": "function", "name": "list_files", "parameters": "@nest@"}],
    }),
    "messages_input_schema": ("/v1/messages", {
        "model": "plan", "max_tokens": 100, "messages": [QUESTION],
        "tools": [{"name": "list_files", "input_schema": "@nest@"}],
    }),
    "gemini_parameters": ("/v1beta/models/plan:generateContent", {
        "contents": [{"role": "user", "parts": [{"text": "Which file?"}]}],
        "tools": [{"functionDeclarations": [{"name": "list_files", "parameters": "@nest@"}]}],
    }),
    "ollama_parameters": ("/api/chat", {
        "model": "plan", "messages": [QUESTION], "stream": False,
        "tools": [{"type": "function", "function": {"name": "list_files", "parameters": "@nest@"}}],
    }),
}


def _error_message(path: str, body: dict) -> str:
    """The error's message, read from the format's own error shape (failing if it is another)."""
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    elif path.startswith("/v1beta/"):
        assert body["error"]["status"] == "INVALID_ARGUMENT" and body["error"]["code"] == 400
    elif path == "/api/chat":
        assert set(body) == {"error"}
        return body["error"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["code"] == "too_deep"
    return body["error"]["message"]


@pytest.fixture(scope="module")
def mock() -> Iterator[httpx.Client]:
    with serve_in_thread() as url, httpx.Client(base_url=url.removesuffix("/v1"), headers=HEADERS,
                                                timeout=30) as client:
        yield client


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_every_depth_to_2000_is_served_or_refused_with_the_formats_400(mock, name):
    path, template = FORMATS[name]
    shell = json.dumps(template)
    outcomes: dict[int, int] = {}
    for levels in DEPTHS:
        body = shell.replace(HOLE, _nested(levels))
        depth = _depth(body)
        response = mock.post(path, content=body)  # a reset connection raises here
        outcomes[depth] = response.status_code
        if depth <= MAX_DEPTH:
            assert response.status_code == 200, (depth, response.text)
        else:
            assert response.status_code == 400, (depth, response.text)
            assert f"more than {MAX_DEPTH} levels deep" in _error_message(path, response.json())
    assert max(outcomes) >= 2000 and min(outcomes) <= MAX_DEPTH  # the sweep crossed the bound
    assert mock.get("/healthz").status_code == 200  # the server kept serving


def test_the_bound_is_exactly_max_depth_in_every_format(mock):
    """The cheap half of the sweep, in every run: each side of the bound, in every format."""
    for path, template in FORMATS.values():
        shell = json.dumps(template)
        before = shell[: shell.index(HOLE)]
        offset = sum(before.count(c) for c in "[{") - sum(before.count(c) for c in "]}")  # the hole's level
        at, past = (shell.replace(HOLE, _nested(MAX_DEPTH - offset + extra)) for extra in (0, 1))
        assert (_depth(at), _depth(past)) == (MAX_DEPTH, MAX_DEPTH + 1)
        assert mock.post(path, content=at).status_code == 200
        assert mock.post(path, content=past).status_code == 400
