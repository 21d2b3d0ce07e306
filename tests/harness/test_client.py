import asyncio
import time

import httpx
import pytest

from harness import Cancel, ModelClient
from harness.cancel import Cancelled
from harness.model import ProviderError

OK = {
    "choices": [
        {"message": {"role": "assistant", "content": "hi", "refusal": None}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}


def _scripted(*responses: httpx.Response | Exception) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if not queue:
            raise AssertionError(f"script ran out at request {len(seen)}")
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    return httpx.MockTransport(handler), seen


def _complete(transport: httpx.AsyncBaseTransport, **kw):
    async def main():
        async with ModelClient("http://model.test/v1", transport=transport, backoff_s=0.01, **kw) as c:
            return await c.complete(model="m", messages=[{"role": "user", "content": "x"}])

    return asyncio.run(main())


def test_429_then_success_is_retried_with_attempt_header_and_retry_after():
    transport, seen = _scripted(
        httpx.Response(429, headers={"retry-after-ms": "120"}, json={"error": {"message": "slow down"}}),
        httpx.Response(200, json=OK),
    )
    t0 = time.monotonic()
    out = _complete(transport)
    assert out.message == {"role": "assistant", "content": "hi"}
    assert out.attempts == 2
    assert [r.headers["x-lab-attempt"] for r in seen] == ["0", "1"]
    assert time.monotonic() - t0 >= 0.12  # honoured retry-after-ms, not the 10 ms backoff


def test_5xx_and_connection_errors_are_retried_then_give_up():
    transport, seen = _scripted(
        httpx.ConnectError("refused"), httpx.Response(500, json={"error": {"message": "boom"}}),
        httpx.Response(503, text="unavailable"),
    )
    with pytest.raises(ProviderError, match="gave up after 3 attempts: HTTP 503"):
        _complete(transport, max_retries=2)
    assert len(seen) == 3


def test_401_is_final_and_carries_the_providers_message():
    transport, seen = _scripted(
        httpx.Response(
            401, json={"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}}
        )
    )
    with pytest.raises(ProviderError, match="Incorrect API key provided.") as info:
        _complete(transport)
    assert (info.value.status, info.value.code, len(seen)) == (401, "invalid_api_key", 1)


def test_malformed_body_is_retried():
    transport, seen = _scripted(httpx.Response(200, text='{"choices": [{"mess'), httpx.Response(200, json=OK))
    assert _complete(transport).attempts == 2


def _key_sent(base_url: str, monkeypatch, *, llm: str | None, openai: str | None) -> str | None:
    for name, value in (("LLM_API_KEY", llm), ("OPENAI_API_KEY", openai)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    transport, seen = _scripted(httpx.Response(200, json=OK))

    async def main():
        async with ModelClient(base_url, transport=transport) as c:
            await c.complete(model="m", messages=[{"role": "user", "content": "x"}])

    asyncio.run(main())
    return seen[0].headers.get("authorization")


def test_llm_api_key_is_sent_to_the_configured_provider(monkeypatch):
    assert _key_sent("http://model.test/v1", monkeypatch, llm="sk-lab", openai="sk-openai") == "Bearer sk-lab"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "http://api.openai.com/v1",
                                 "https://api.openai.com.evil.test/v1", "https://evil.test/api.openai.com/v1"])
def test_openai_api_key_never_goes_anywhere_but_openais_own_https_api(url, monkeypatch):
    assert _key_sent(url, monkeypatch, llm=None, openai="sk-openai") is None


def test_openai_api_key_is_sent_to_api_openai_com_over_https(monkeypatch):
    sent = _key_sent("https://api.openai.com/v1", monkeypatch, llm=None, openai="sk-openai")
    assert sent == "Bearer sk-openai"


@pytest.mark.parametrize(
    "usage",
    [{"prompt_tokens": -100000, "completion_tokens": 1}, {"prompt_tokens": 10**400, "completion_tokens": 1},
     {"prompt_tokens": 10, "completion_tokens": 10**9}, {"prompt_tokens": 1.5, "completion_tokens": 1},
     {"prompt_tokens": True, "completion_tokens": 1}],
    ids=["negative", "400 digits", "at the bound", "fraction", "boolean"],
)
def test_usage_that_is_not_a_sane_whole_number_makes_the_reply_malformed(usage):
    body = {**OK, "usage": usage}
    transport, seen = _scripted(*[httpx.Response(200, json=body)] * 2)
    with pytest.raises(ProviderError, match="malformed response body.*usage"):
        _complete(transport, max_retries=1)
    assert len(seen) == 2


class _Trickle(httpx.AsyncByteStream):
    """A body that arrives one byte every `gap` seconds: each read is quick, the whole is not."""

    def __init__(self, body: bytes, gap: float) -> None:
        self.body, self.gap = body, gap

    async def __aiter__(self):
        for i in range(len(self.body)):
            await asyncio.sleep(self.gap)
            yield self.body[i : i + 1]


def test_a_trickled_body_is_cut_off_at_the_attempt_deadline_not_per_read():
    import json as _json

    body = _json.dumps(OK).encode()

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Trickle(body, 0.02), headers={"content-type": "application/json"})

    async def main():
        async with ModelClient("http://model.test/v1", transport=httpx.MockTransport(handler), backoff_s=0,
                               max_retries=1, deadline_s=0.3, timeout=5.0) as c:
            await c.complete(model="m", messages=[{"role": "user", "content": "x"}])

    with pytest.raises(ProviderError, match="gave up after 2 attempts: no complete reply within the 0.3 s"):
        asyncio.run(main())  # the body needs len(body) * 20 ms, several seconds: never waited for


def test_cancel_abandons_the_http_call_at_once(mock_url):
    async def main():
        cancel = Cancel()
        async with ModelClient(mock_url) as c:
            asyncio.get_running_loop().call_later(0.1, cancel.set, "user pressed Stop")
            t0 = time.monotonic()
            with pytest.raises(Cancelled, match="user pressed Stop"):
                await c.complete(model="plan+latency=800", messages=[{"role": "user", "content": "x"}],
                                 cancel=cancel)
            return time.monotonic() - t0

    assert asyncio.run(main()) < 0.5  # not the 0.8 s the provider would have taken


def _reply(message) -> httpx.Response:
    return httpx.Response(200, json={**OK, "choices": [{"message": message, "finish_reason": "stop"}]})


@pytest.mark.parametrize(
    "message",
    [None, "hi", {"content": 5},
     {"content": None, "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}]},
     {"content": None, "tool_calls": [{"id": 1, "function": {"name": "f", "arguments": "{}"}}]}],
    ids=["null", "string", "content_number", "arguments_object", "id_number"],
)
def test_a_reply_of_the_wrong_shape_is_retried_then_a_provider_error(message):
    transport, seen = _scripted(*[_reply(message)] * 3)
    with pytest.raises(ProviderError, match="malformed response body"):
        _complete(transport, max_retries=2)
    assert len(seen) == 3


def test_a_retry_after_beyond_max_wait_fails_instead_of_retrying_early():
    transport, seen = _scripted(httpx.Response(429, headers={"retry-after": "60"}, json={}))
    with pytest.raises(ProviderError, match="asked to retry after 60 s"):
        _complete(transport, max_wait_s=5)
    assert len(seen) == 1


@pytest.mark.parametrize("value", ["nan", "-3", "inf", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_nonsense_retry_after_falls_back_to_backoff(value):
    transport, seen = _scripted(httpx.Response(429, headers={"retry-after": value}, json={}),
                                httpx.Response(200, json=OK))
    assert _complete(transport).attempts == 2


def test_an_id_reused_anywhere_in_a_long_reply_makes_it_malformed():
    """Checked for every call, not just near the start (and in linear time: 20,000 calls took
    23 s of CPU when each id was compared with every earlier one)."""
    calls = [{"id": f"c{n}", "function": {"name": "f", "arguments": "{}"}} for n in range(5000)]
    calls.append({"id": "c4999", "function": {"name": "f", "arguments": "{}"}})
    transport, seen = _scripted(*[_reply({"content": None, "tool_calls": calls})] * 2)
    with pytest.raises(ProviderError, match="tool call id 'c4999' is reused within one reply"):
        _complete(transport, max_retries=1)
    assert len(seen) == 2
    distinct = calls[:-1]
    transport, _ = _scripted(_reply({"content": None, "tool_calls": distinct}))
    assert len(_complete(transport).message["tool_calls"]) == 5000


def test_a_provider_that_is_not_running_is_named_by_its_address_without_credentials():
    import socket

    with socket.socket() as s:  # a port nothing listens on once this block closes it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main():
        async with ModelClient(f"http://user:s3cret@127.0.0.1:{port}/v1?key=k3y", max_retries=0) as c:
            await c.complete(model="plan", messages=[{"role": "user", "content": "hi"}])

    with pytest.raises(ProviderError) as raised:
        asyncio.run(main())
    assert f"nothing accepts connections at http://127.0.0.1:{port}" in str(raised.value)
    assert "s3cret" not in str(raised.value) and "k3y" not in str(raised.value)
