"""Every reply carries the real APIs' headers: request ids, processing time, scriptable rate limits."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from mockprovider.apis import anthropic as anthropic_api
from mockprovider.apis import chat as chat_api
from mockprovider.apis import responses as responses_api
from mockprovider.server import serve_in_thread

QUESTION = [{"role": "user", "content": "Which file mentions a timeout?"}]
RATE_LIMIT = ("limit-requests", "limit-tokens", "remaining-requests", "remaining-tokens",
              "reset-requests", "reset-tokens")


def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0)


def test_chat_replies_carry_a_fresh_request_id_the_sdk_reads(mock_url):
    with _openai(mock_url) as client:
        create = client.chat.completions.with_raw_response.create
        raws = [create(model="plan", messages=QUESTION) for _ in "ab"]
        ids = [r.headers["x-request-id"] for r in raws]
        assert raws[0].parse()._request_id == ids[0]
    assert ids[0] != ids[1] and all(i.startswith("req_") for i in ids)
    assert int(raws[0].headers["openai-processing-ms"]) >= 0
    assert {f"x-ratelimit-{k}" for k in RATE_LIMIT} <= raws[0].headers.keys()


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_streams_and_errors_carry_the_headers_too(mock_url, path):
    body = {"model": "plan", "stream": True}
    body |= {"messages": QUESTION} if path == "/chat/completions" else {"input": "hi"}
    streamed = httpx.post(mock_url + path, json=body)
    unknown = httpx.post(mock_url + path, json={**body, "model": "nope"})
    limited = httpx.post(mock_url + path, json={**body, "model": "plan+fault=429"})
    for reply in (streamed, unknown, limited):
        assert reply.headers["x-request-id"].startswith("req_")
        assert reply.headers["x-ratelimit-remaining-tokens"] == "30000000"
    assert (unknown.status_code, limited.status_code, limited.headers["retry-after-ms"]) == (404, 429, "100")


def test_the_processing_time_includes_the_scripted_latency(mock_url):
    body = {"model": "plan+latency=60", "messages": QUESTION}
    reply = httpx.post(mock_url + "/chat/completions", json=body)
    assert int(reply.headers["openai-processing-ms"]) >= 60


def test_rate_limit_figures_are_scripted_by_options(mock_url):
    with _openai(mock_url) as client:
        raw = client.chat.completions.with_raw_response.create(
            model="plan+ratelimit=500:20000+remaining=7:1200", messages=QUESTION)
    got = {k: raw.headers[f"x-ratelimit-{k}"] for k in RATE_LIMIT[:4]}
    assert got == {"limit-requests": "500", "limit-tokens": "20000", "remaining-requests": "7",
                   "remaining-tokens": "1200"}


def test_anthropic_replies_carry_request_id_and_its_rate_limit_headers(mock_url):
    root = mock_url.removesuffix("/v1")
    with anthropic.Anthropic(base_url=root, api_key="unused", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(
            model="plan+remaining=9:4000", max_tokens=50, messages=QUESTION)
        message = raw.parse()
        with pytest.raises(anthropic.NotFoundError) as caught:
            client.messages.create(model="nope", max_tokens=50, messages=QUESTION)
    assert message._request_id == raw.headers["request-id"]
    assert raw.headers["anthropic-ratelimit-tokens-remaining"] == "4000"
    assert raw.headers["anthropic-ratelimit-requests-remaining"] == "9"
    assert raw.headers["anthropic-ratelimit-tokens-reset"].endswith("Z")
    assert "x-request-id" not in raw.headers
    error_id = caught.value.response.headers["request-id"]
    assert caught.value.body["request_id"] == error_id == caught.value.request_id


@pytest.mark.parametrize("version", ["v1", "v1beta"])
@pytest.mark.parametrize("method", ["generateContent", "streamGenerateContent?alt=sse", "countTokens"])
def test_gemini_replies_carry_none_of_openais_headers_under_either_version(mock_url, version, method):
    # Google's API sends no OpenAI request id, processing time or rate-limit headers, and
    # google-genai posts under /v1/ when given only a base URL.
    root = mock_url.removesuffix("/v1")
    body = {"contents": [{"role": "user", "parts": [{"text": "Which file mentions a timeout?"}]}]}
    replies = [httpx.post(f"{root}/{version}/models/{model}:{method}", json=body)
               for model in ("plan", "plan+fault=429", "nope")]
    faulted = 200 if method == "countTokens" else 429  # counting tokens meets no fault
    assert [r.status_code for r in replies] == [200, faulted, 404]
    for reply in replies:
        openai_headers = {"x-request-id", "openai-processing-ms", *(f"x-ratelimit-{k}" for k in RATE_LIMIT)}
        assert openai_headers.isdisjoint(reply.headers.keys()), reply.headers


def test_the_model_listing_states_the_options_of_its_prefix_and_header(mock_url):
    root = mock_url.removesuffix("/v1")
    prefixed = httpx.get(f"{root}/o/remaining=7:1200/v1/models")
    sent = httpx.get(f"{mock_url}/models", headers={"x-mock-options": "ratelimit=500:20000"})
    bad = httpx.get(f"{root}/o/remaining=a:b/v1/models")
    left = {k: prefixed.headers[f"x-ratelimit-remaining-{k}"] for k in ("requests", "tokens")}
    assert left == {"requests": "7", "tokens": "1200"}
    assert sent.headers["x-ratelimit-limit-tokens"] == "20000"
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "base_url"


@pytest.mark.parametrize("option", ["ratelimit=5", "remaining=a:b", "ratelimit=1:2:3"])
def test_a_bad_rate_limit_option_is_a_400(in_process, option):
    reply = in_process.post("/v1/chat/completions", json={"model": f"plan+{option}", "messages": QUESTION})
    assert reply.status_code == 400 and "REQUESTS:TOKENS" in reply.json()["error"]["message"]


@pytest.mark.parametrize("option", ["remaining=10001:5", "ratelimit=100:1000+remaining=5:1001"])
def test_remaining_above_its_limit_is_a_400(in_process, option):
    """No real API states more left than its limit; a client's back-off test would be testing nonsense."""
    reply = in_process.post("/v1/chat/completions", json={"model": f"plan+{option}", "messages": QUESTION})
    assert reply.status_code == 400 and "remaining" in reply.json()["error"]["message"]


def test_a_500_from_a_bug_in_the_mock_carries_the_request_id_in_each_apis_shape(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    for module, name in ((chat_api, "render"), (responses_api, "_response"), (anthropic_api, "_message")):
        monkeypatch.setattr(module, name, broken)
    # A client each: the server closes a connection after a 500 from a bug, and a client that
    # reused it would meet a reset instead of the reply.
    with serve_in_thread() as url:
        with _openai(url) as client, pytest.raises(openai.InternalServerError) as chat:
            client.chat.completions.create(model="plan", messages=QUESTION)
        with _openai(url) as client, pytest.raises(openai.InternalServerError) as responses:
            client.responses.create(model="plan", input="hi")
        claude = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=0)
        with claude, pytest.raises(anthropic.InternalServerError) as messages:
            claude.messages.create(model="plan", max_tokens=50, messages=QUESTION)
    for caught in (chat, responses):
        assert caught.value.request_id.startswith("req_")
        assert caught.value.response.headers["x-ratelimit-remaining-tokens"] == "30000000"
    body = messages.value.body
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert body["request_id"] == messages.value.request_id == messages.value.response.headers["request-id"]
