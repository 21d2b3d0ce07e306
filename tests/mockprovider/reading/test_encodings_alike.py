"""A body's encoding (JSON's UTF-8, -16 or -32, with or without a BOM) never changes its answer:
a lone surrogate is refused, or kept, in every encoding as in UTF-8. Through a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from mockprovider.reading.validation import wide
from mockprovider.server import serve_in_thread

USER = "h\ud800i"
"""A user's text holding a lone (high) surrogate."""
MESSAGES = [{"role": "user", "content": USER}]
SURFACES = {
    "chat": ("/v1/chat/completions", {"model": "plan", "messages": MESSAGES}),
    "azure chat": ("/openai/v1/chat/completions", {"model": "plan", "messages": MESSAGES}),
    "responses": ("/v1/responses", {"model": "plan", "input": [{"role": "user", "content": USER}]}),
    "messages": ("/v1/messages", {"model": "plan", "max_tokens": 50, "messages": MESSAGES}),
    "count_tokens": ("/v1/messages/count_tokens", {"model": "plan", "messages": MESSAGES}),
    "embeddings": ("/v1/embeddings", {"model": "text-embedding-3-small", "input": USER}),
    "gemini": ("/v1beta/models/plan:generateContent",
               {"contents": [{"role": "user", "parts": [{"text": USER}]}]}),
    "ollama": ("/api/chat", {"model": "plan", "stream": False, "messages": MESSAGES}),
}
KEEPS = {"gemini", "ollama"}
"""Surfaces whose real APIs take a lone surrogate (so the mock answers 200, in every encoding)."""
ENCODINGS = ["utf-8-sig", "utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32-be", "utf-32"]
"""JSON's other encodings (RFC 8259 8.1; Python's `json` reads them all): `utf-16`/`utf-32` write a BOM."""
WRITTEN = {
    "escaped": lambda body: json.dumps(body),  # `\ud800`, six ASCII characters
    "raw code unit": lambda body: json.dumps(body, ensure_ascii=False),  # the surrogate itself
}


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with serve_in_thread() as url, httpx.Client(base_url=url.removesuffix("/v1")) as client:
        yield client


def _post(client: httpx.Client, surface: str, written: str, encoding: str) -> httpx.Response:
    path, body = SURFACES[surface]
    raw = WRITTEN[written](body).encode(encoding, "surrogatepass")
    return client.post(path, content=raw, headers={"content-type": "application/json",
                                                   "authorization": "Bearer k", "x-api-key": "k"})


def _error(response: httpx.Response) -> dict:
    error = response.json()["error"]
    return error if isinstance(error, dict) else {"message": error}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("written", list(WRITTEN))
@pytest.mark.parametrize("surface", list(SURFACES))
def test_a_lone_surrogate_is_answered_as_in_utf8_in_every_encoding(client, surface, written, encoding):
    utf8 = _post(client, surface, written, "utf-8")
    other = _post(client, surface, written, encoding)
    assert utf8.status_code == (200 if surface in KEEPS else 400), utf8.text
    assert other.status_code == utf8.status_code, other.text
    if utf8.status_code == 200:
        return
    if written == "escaped":  # the same string named, in the same words
        assert _error(other) == _error(utf8)
        assert "lone surrogate" in _error(other)["message"]
    else:  # invalid UTF-8, invalid UTF-16 or -32: the body cannot be decoded, whichever it is
        assert {k: v for k, v in _error(other).items() if k != "message"} == \
               {k: v for k, v in _error(utf8).items() if k != "message"}
        prefix = _error(utf8)["message"].partition("UnicodeDecodeError")[0]
        assert _error(other)["message"].startswith(prefix + "UnicodeDecodeError"), _error(other)


@pytest.mark.parametrize("encoding", ["utf-8", *ENCODINGS])
@pytest.mark.parametrize("surface", list(SURFACES))
def test_a_pair_of_surrogates_is_one_character_and_answered_in_every_encoding(client, surface, encoding):
    path, body = SURFACES[surface]
    text = json.dumps(body).replace("\\ud800", "\\ud83d\\ude00")  # an emoji, written as JSON escapes a pair
    for raw in (text, json.dumps(json.loads(text), ensure_ascii=False)):  # escaped, then the emoji itself
        response = client.post(path, content=raw.encode(encoding), headers={
            "content-type": "application/json", "authorization": "Bearer k", "x-api-key": "k"})
        assert response.status_code == 200, (raw, response.text)


@pytest.mark.parametrize("encoding", ["utf-8", *ENCODINGS])
def test_a_body_is_wide_exactly_when_json_reads_it_as_utf16_or_utf32(encoding):
    raw = ' \n{"model": "plan"}'.encode(encoding)
    assert wide(raw) == (not json.detect_encoding(raw).startswith("utf-8"))
    assert wide(raw) == (not encoding.startswith("utf-8"))
