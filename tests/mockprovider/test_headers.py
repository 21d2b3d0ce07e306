"""Every reply carries the real APIs' headers: request ids, processing time, scriptable rate limits."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

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


@pytest.mark.parametrize("option", ["ratelimit=5", "remaining=a:b", "ratelimit=1:2:3"])
def test_a_bad_rate_limit_option_is_a_400(in_process, option):
    reply = in_process.post("/v1/chat/completions", json={"model": f"plan+{option}", "messages": QUESTION})
    assert reply.status_code == 400 and "REQUESTS:TOKENS" in reply.json()["error"]["message"]


@pytest.mark.parametrize("option", ["remaining=10001:5", "ratelimit=100:1000+remaining=5:1001"])
def test_remaining_above_its_limit_is_a_400(in_process, option):
    """No real API states more left than its limit; a client's back-off test would be testing nonsense."""
    reply = in_process.post("/v1/chat/completions", json={"model": f"plan+{option}", "messages": QUESTION})
    assert reply.status_code == 400 and "remaining" in reply.json()["error"]["message"]
