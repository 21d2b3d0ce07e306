"""Latency, stateless fault injection keyed by (turn, attempt), and API-key authentication."""

from __future__ import annotations

import logging
import time

import httpx
import openai
import pytest

from mockprovider.errors import APIError
from mockprovider.scripts import options as faults
from mockprovider.scripts.options import Fault, Options
from mockprovider.server import serve_in_thread

USER = {"role": "user", "content": "Which file mentions a timeout?"}
TOOLS = [{"type": "function", "function": {"name": n}} for n in ("list_files", "read_file")]
TURN1 = [
    USER,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "errors.log"},
]


def _client(base_url: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", **{"max_retries": 0, **kwargs})


def _prefixed(mock_url: str, options: str) -> str:
    """`http://host:port/v1` → `http://host:port/o/<options>/v1`."""
    assert mock_url.endswith("/v1")
    return f"{mock_url[: -len('/v1')]}/o/{options}/v1"


def _root(mock_url: str) -> str:
    return mock_url[: -len("/v1")]


def _healthy(mock_url: str) -> bool:
    with httpx.Client() as client:
        return client.get(f"{_root(mock_url)}/healthz").status_code == 200


def _log_lines(caplog, model: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mockprovider" and f"model={model} " in r.getMessage()
    ]


def test_official_client_retries_past_a_429_and_the_server_logs_both_attempts(mock_url, caplog):
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = "plan+fault=429@0x1"
    with _client(mock_url, max_retries=2) as client:
        completion = client.chat.completions.create(model=model, messages=[USER], tools=TOOLS)
    assert completion.choices[0].message.tool_calls[0].id == "c1"
    assert _log_lines(caplog, model) == [
        f"model={model} turn=0 attempt=0 status=429",
        f"model={model} turn=0 attempt=1 status=ok",
    ]


def test_429_carries_retry_after_headers(mock_url):
    with httpx.Client(base_url=mock_url) as client:
        default = client.post("/chat/completions", json={"model": "plan+fault=429", "messages": [USER]})
        custom = client.post(
            "/chat/completions", json={"model": "plan+fault=429+retry=2500", "messages": [USER]}
        )
    assert default.status_code == custom.status_code == 429
    assert default.json()["error"]["code"] == "rate_limit_exceeded"
    assert (default.headers["retry-after-ms"], default.headers["retry-after"]) == ("100", "1")
    assert (custom.headers["retry-after-ms"], custom.headers["retry-after"]) == ("2500", "3")


def test_429_on_first_k_attempts_is_keyed_by_the_attempt_header(mock_url):
    body = {"model": "plan+fault=429x2", "messages": [USER]}
    with httpx.Client(base_url=mock_url) as client:
        statuses = [
            client.post("/chat/completions", json=body, headers={header: str(n)}).status_code
            for header in ("x-lab-attempt", "x-stainless-retry-count")
            for n in range(3)
        ]
        no_header = client.post("/chat/completions", json=body).status_code
    assert statuses == [429, 429, 200, 429, 429, 200]
    assert no_header == 429


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fault=429", Fault(kind="429")),
        ("fault=500@1", Fault(kind="500", turn=1)),
        ("fault=429@1x2", Fault(kind="429", turn=1, attempts=2)),
        ("fault=429x2", Fault(kind="429", attempts=2)),
        ("fault=hangx3", Fault(kind="hang", attempts=3)),
        ("fault=malformed@0", Fault(kind="malformed", turn=0)),
    ],
)
def test_fault_syntax_parses(text, expected):
    assert faults.apply(Options(), text, param="model").faults == (expected,)


def test_options_parse_and_later_sources_override_earlier_ones():
    options = faults.apply(Options(latency_ms=5), "latency=250+rate=40+retry=900", param="base_url")
    options = faults.apply(options, "latency=10+fault=401", param="model")
    assert (options.latency_ms, options.rate_tps, options.retry_ms) == (10, 40, 900)
    assert options.fault_for(turn=3, attempt=0) == Fault(kind="401")
    assert options.fault_for(turn=3, attempt=1) is None


@pytest.mark.parametrize(
    "text",
    [
        "latency=abc", "latency=-1", "latency=nan", "rate=inf",
        "fault=teapot", "fault=429@x", "fault=500\n", "nokey", "foo=1",
    ],
)
def test_bad_option_strings_raise_400_naming_the_source(text):
    with pytest.raises(APIError) as info:
        faults.apply(Options(), text, param="x-mock-options")
    assert (info.value.status, info.value.param) == (400, "x-mock-options")


def test_500_fault_raises_internal_server_error(mock_url):
    with _client(mock_url) as client, pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="plan+fault=500", messages=[USER])
    assert info.value.status_code == 500


def test_401_fault_raises_authentication_error(mock_url):
    with _client(mock_url) as client, pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="plan+fault=401", messages=[USER])
    assert info.value.code == "invalid_api_key"


def test_malformed_fault_gives_the_client_a_body_it_cannot_decode(mock_url):
    with httpx.Client(base_url=mock_url) as raw:
        response = raw.post("/chat/completions", json={"model": "plan+fault=malformed", "messages": [USER]})
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()
    with _client(mock_url) as client, pytest.raises(ValueError):
        client.chat.completions.create(model="plan+fault=malformed", messages=[USER])


def test_hang_fault_times_the_client_out_and_the_server_keeps_serving(mock_url):
    started = time.monotonic()
    with _client(mock_url, timeout=0.3) as client, pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="plan+fault=hang", messages=[USER])
    assert time.monotonic() - started >= 0.3
    assert _healthy(mock_url)
    with _client(mock_url) as client:
        assert client.chat.completions.create(model="plan", messages=[USER]).choices[0].finish_reason


def test_a_hang_ends_once_its_client_leaves_and_is_counted_as_the_504_it_gave_up_with():
    """The hang polls for the disconnect with Starlette's `is_disconnected` (anyio), which needs a
    task: the chat lane, started without one (`cycle.STARTS_WITHOUT_TASK`), takes one first
    (without it, the poll fails and the request is counted as a 500)."""
    with serve_in_thread() as url:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{url}/chat/completions", timeout=0.3,
                       json={"model": "plan+fault=hang", "messages": [USER]})
        deadline = time.monotonic() + 5
        while "status=\"504\"" not in (counted := _chat_counts(url)) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert counted == [f'{COUNTED}/v1/chat/completions",scenario="plan",status="504"}} 1.0']


def _chat_counts(url: str) -> list[str]:
    page = httpx.get(url.removesuffix("/v1") + "/metrics").text
    return [line for line in page.splitlines() if line.startswith(f'{COUNTED}/v1/chat')]


COUNTED = 'mockprovider_requests_total{route="'
"""How a line of `/metrics` counting requests begins, up to the route."""


def test_fault_keyed_by_turn_spares_other_turns(mock_url):
    with _client(mock_url) as client:
        first = client.chat.completions.create(model="plan+fault=500@1", messages=[USER], tools=TOOLS)
        assert first.choices[0].message.tool_calls[0].id == "c1"
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="plan+fault=500@1", messages=TURN1)
        later = client.chat.completions.create(
            model="plan+fault=500@1", messages=TURN1, tools=TOOLS, extra_headers={"x-lab-attempt": "1"}
        )
    assert later.choices[0].message.tool_calls[0].id == "c2"


def test_options_in_the_base_url_prefix(mock_url):
    with _client(_prefixed(mock_url, "fault=500@1")) as client:
        assert client.chat.completions.create(model="plan", messages=[USER]).choices[0].finish_reason
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="plan", messages=TURN1)
        assert [m.id for m in client.models.list()][0] == "plan"


def test_options_in_the_x_mock_options_header(mock_url):
    with (
        _client(mock_url, default_headers={"x-mock-options": "fault=401"}) as client,
        pytest.raises(openai.AuthenticationError),
    ):
        client.chat.completions.create(model="plan", messages=[USER])


def test_bad_options_in_prefix_or_header_are_400_naming_the_source(mock_url):
    with httpx.Client() as client:
        prefix = client.post(
            f"{_prefixed(mock_url, 'fault=teapot')}/chat/completions",
            json={"model": "plan", "messages": [USER]},
        )
        header = client.post(
            f"{mock_url}/chat/completions",
            json={"model": "plan", "messages": [USER]},
            headers={"x-mock-options": "latency=abc"},
        )
    assert (prefix.status_code, prefix.json()["error"]["param"]) == (400, "base_url")
    assert (header.status_code, header.json()["error"]["param"]) == (400, "x-mock-options")


def test_faults_from_every_source_add_up(mock_url):
    body = {"model": "plan+fault=500@1", "messages": [USER]}
    with httpx.Client() as client:
        url = f"{_prefixed(mock_url, 'fault=429@0')}/chat/completions"
        assert client.post(url, json=body).status_code == 429
        assert client.post(url, json={**body, "messages": TURN1}).status_code == 500
        assert client.post(url, json=body, headers={"x-lab-attempt": "1"}).status_code == 200


def test_latency_delays_the_first_byte(mock_url):
    with _client(mock_url) as client:
        started = time.monotonic()
        client.chat.completions.create(model="plan+latency=200", messages=[USER])
        # A behaviour check with a lower bound only, never a speed assertion.
        assert time.monotonic() - started >= 0.2


def test_server_wide_latency_default(serve_mock):
    with serve_mock(latency_ms=150) as url, _client(url) as client:
        started = time.monotonic()
        client.chat.completions.create(model="plan", messages=[USER])
        assert time.monotonic() - started >= 0.15


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"authorization": "Bearer wrong"}, 401, "invalid_api_key"),
        ({}, 401, "missing_api_key"),
        ({"authorization": "Bearer secret"}, 200, None),
    ],
    ids=["wrong", "missing", "right"],
)
def test_api_key_is_required_when_configured(keyed_mock_url, headers, status, code):
    with httpx.Client(base_url=keyed_mock_url) as client:
        chat = client.post("/chat/completions", json={"model": "plan", "messages": [USER]}, headers=headers)
        models = client.get("/models", headers=headers)
    assert chat.status_code == models.status_code == status
    if code:
        error = chat.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["code"] == code and error["type"] == "invalid_request_error"
    assert _healthy(keyed_mock_url)


def test_official_client_with_wrong_key_gets_authentication_error(keyed_mock_url):
    with openai.OpenAI(base_url=keyed_mock_url, api_key="wrong", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model="plan", messages=[USER])
    with openai.OpenAI(base_url=keyed_mock_url, api_key="secret", max_retries=0) as client:
        assert client.chat.completions.create(model="plan", messages=[USER]).choices[0].finish_reason


def test_healthz_needs_no_key(keyed_mock_url):
    assert _healthy(keyed_mock_url)


def test_x_lab_attempt_wins_over_x_stainless_retry_count(mock_url):
    body = {"model": "plan+fault=429x1", "messages": [USER]}
    with httpx.Client(base_url=mock_url) as client:
        said = [client.post("/chat/completions", json=body, headers={
            "x-lab-attempt": lab, "x-stainless-retry-count": sdk}).status_code
            for lab, sdk in (("1", "0"), ("0", "1"))]
    assert said == [200, 429]


def test_attempt_seen_counts_identical_requests_whatever_the_headers_say(mock_url):
    asked = [{"role": "user", "content": "counted, not said"}]
    body = {"model": "plan+fault=429x2+attempt=seen", "messages": asked}
    with httpx.Client(base_url=mock_url, headers={"x-stainless-retry-count": "0"}) as client:
        statuses = [client.post("/chat/completions", json=body).status_code for _ in range(4)]
    assert statuses == [429, 429, 200, 429]  # answered, so the same request again is a new one


def test_an_unknown_attempt_source_is_a_400_naming_it(mock_url):
    sent = httpx.post(f"{mock_url}/chat/completions", json={"model": "plan+attempt=told", "messages": [USER]})
    assert sent.status_code == 400 and "attempt=sent|seen" in sent.json()["error"]["message"]
