"""Every bad input gets an OpenAI-shaped 4xx, never a 500, and the server keeps serving."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx
import pytest

import o200k
from mockprovider.scripts.scenarios import SCENARIOS
from mockprovider.server import serve_in_thread

LIMIT = 200_000
USER = {"role": "user", "content": "hi"}
CALL = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def small_mock_url() -> Iterator[str]:
    """A mock whose body limit is small enough to exceed cheaply."""
    with serve_in_thread(max_body_bytes=LIMIT) as url:
        yield url


def chat(body, **overrides) -> dict:
    """A POST /v1/chat/completions case with a JSON body (already encoded if bytes)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return {
        "method": "POST",
        "path": "/v1/chat/completions",
        "content": content,
        "headers": JSON,
        **overrides,
    }


def _chunked(data: bytes) -> list[bytes]:
    """A body httpx sends chunked, without content-length, so only the streaming cap can stop it."""
    return [data[i : i + 65536] for i in range(0, len(data), 65536)]


def ok(**fields) -> dict:
    return {"model": "plan", "messages": [USER], **fields}


OVERSIZED = json.dumps(ok(padding="x" * (LIMIT + 1))).encode()

CASES = {
    "malformed_json": (chat(b'{"model": "plan",'), 400, None),
    "body_is_array": (chat([ok()]), 400, None),
    "body_is_string": (chat("plan"), 400, None),
    "empty_body": (chat(b""), 400, None),
    "missing_model": (chat({"messages": [USER]}), 400, "model"),
    "model_not_string": (chat(ok(model=5)), 400, "model"),
    "empty_model": (chat(ok(model="")), 400, "model"),
    "missing_messages": (chat({"model": "plan"}), 400, "messages"),
    "empty_messages": (chat(ok(messages=[])), 400, "messages"),
    "messages_not_array": (chat(ok(messages="hi")), 400, "messages"),
    "message_not_object": (chat(ok(messages=["hi"])), 400, "messages[0]"),
    "unknown_scenario": (chat(ok(model="plann")), 404, "model"),
    "bad_role": (chat(ok(messages=[{"role": "robot", "content": "hi"}])), 400, "messages[0].role"),
    "missing_role": (chat(ok(messages=[{"content": "hi"}])), 400, "messages[0].role"),
    "content_not_text": (chat(ok(messages=[{"role": "user", "content": 5}])), 400, "messages[0].content"),
    "name_not_string": (chat(ok(messages=[{**USER, "name": 5}])), 400, "messages[0].name"),
    "tool_answers_unknown_call": (
        chat(
            ok(
                messages=[
                    USER,
                    {"role": "assistant", "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "c9", "content": "x"},
                ]
            )
        ),
        400,
        "messages.[2].role",
    ),
    "tool_answers_a_later_call": (
        chat(
            ok(
                messages=[
                    USER,
                    {"role": "tool", "tool_call_id": "c1", "content": "x"},
                    {"role": "assistant", "tool_calls": [CALL]},
                ]
            )
        ),
        400,
        "messages.[1].role",
    ),
    "tool_without_call_id": (
        chat(
            ok(messages=[USER, {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "content": "x"}])
        ),
        400,
        "messages[2].tool_call_id",
    ),
    "tool_calls_not_array": (
        chat(ok(messages=[USER, {"role": "assistant", "tool_calls": "list_files"}])),
        400,
        "messages[1].tool_calls",
    ),
    "tool_call_without_function": (
        chat(ok(messages=[USER, {"role": "assistant", "tool_calls": [{"id": "c1"}]}])),
        400,
        "messages[1].tool_calls[0]",
    ),
    "tool_calls_on_a_user_message": (
        chat(ok(messages=[{**USER, "tool_calls": "list_files"}])),
        400,
        None,
    ),
    "tools_not_array": (chat(ok(tools={"type": "function"})), 400, "tools"),
    "body_over_limit": (chat(OVERSIZED), 413, None),
    "chunked_body_over_limit": (chat(OVERSIZED, content=_chunked(OVERSIZED)), 413, None),
    "wrong_content_type": (chat(ok(), headers={"content-type": "text/plain"}), 415, None),
    "no_content_type": (chat(ok(), headers={}), 415, None),
    "max_tokens_zero": (chat(ok(max_tokens=0)), 400, "max_tokens"),
    "max_tokens_negative": (chat(ok(max_tokens=-1)), 400, "max_tokens"),
    "max_tokens_string": (chat(ok(max_tokens="5")), 400, "max_tokens"),
    "max_tokens_bool": (chat(ok(max_tokens=True)), 400, "max_tokens"),
    "max_tokens_float": (chat(ok(max_tokens=1.5)), 400, "max_tokens"),
    "max_completion_tokens_zero": (chat(ok(max_completion_tokens=0)), 400, "max_completion_tokens"),
    "stream_string": (chat(ok(stream="yes")), 400, "stream"),
    "stream_int": (chat(ok(stream=1)), 400, "stream"),
    "stream_options_not_object": (chat(ok(stream=True, stream_options="usage")), 400, "stream_options"),
    # A string is not a flag: "false" must not turn the usage chunk on.
    "include_usage_string": (chat(ok(stream=True, stream_options={"include_usage": "false"})), 400,
                             "stream_options.include_usage"),
    "n_two": (chat(ok(n=2)), 400, "n"),
    "n_bool": (chat(ok(n=True)), 400, "n"),
    "bad_max_tokens_beside_a_good_max_completion_tokens": (
        chat(ok(max_completion_tokens=5, max_tokens="x")),
        400,
        "max_tokens",
    ),
    "fault_turn_too_long_for_int": (chat(ok(model="plan+fault=429@" + "9" * 5000)), 400, "model"),
    "fault_times_too_long_for_int": (chat(ok(model="plan+fault=429x" + "9" * 5000)), 400, "model"),
    "bad_latency_option": (chat(ok(model="plan+latency=abc")), 400, "model"),
    "bad_fault_option": (chat(ok(model="plan+fault=teapot")), 400, "model"),
    "option_without_value": (chat(ok(model="plan+latency")), 400, "model"),
    "unknown_option": (chat(ok(model="plan+speed=9")), 400, "model"),
    "invalid_utf8": (
        chat(b'{"model": "plan", "messages": [{"role": "user", "content": "\xff\xfe"}]}'),
        400,
        None,
    ),
    "deeply_nested_json": (chat(b"[" * 100_000), 400, None),
    "nested_past_the_depth_bound": (
        chat(json.dumps(ok()).encode()[:-1] + b', "x": ' + b"[" * 70 + b"]" * 70 + b"}"), 400, None,
    ),
    "tool_calls_left_unanswered": (
        chat(ok(messages=[USER, {"role": "assistant", "tool_calls": [CALL]}])), 400, "messages.[1].role",
    ),
    "tool_choice_malformed": (chat(ok(tools=[{"type": "function", "function": {"name": "list_files"}}],
                                      tool_choice="always")), 400, "tool_choice"),
    "tool_choice_names_an_undeclared_function": (
        chat(ok(tools=[{"type": "function", "function": {"name": "list_files"}}],
                tool_choice={"type": "function", "function": {"name": "rm"}})),
        400,
        "tool_choice",
    ),
    "tool_choice_required_without_tools": (chat(ok(tool_choice="required")), 400, "tool_choice"),
    "unknown_path": ({"method": "GET", "path": "/v1/nope"}, 404, None),
    "unknown_root_path": ({"method": "POST", "path": "/completions", "json": ok()}, 404, None),
    "get_chat_completions": ({"method": "GET", "path": "/v1/chat/completions"}, 405, None),
    "delete_models": ({"method": "DELETE", "path": "/v1/models"}, 405, None),
    "post_healthz": ({"method": "POST", "path": "/healthz", "json": {}}, 405, None),
}


@pytest.mark.parametrize(("request_kwargs", "status", "param"), CASES.values(), ids=CASES.keys())
def test_bad_input_gets_an_openai_shaped_error(small_mock_url, request_kwargs, status, param):
    root = small_mock_url.removesuffix("/v1")
    kwargs = dict(request_kwargs)
    path = kwargs.pop("path")
    with httpx.Client(base_url=root) as client:
        response = client.request(url=path, **kwargs)
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert list(body) == ["error"]
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert isinstance(error["message"], str) and error["message"]
        assert isinstance(error["type"], str) and error["type"]
        assert error["code"] is None or isinstance(error["code"], str)
        if param is not None:
            assert error["param"] == param
    with httpx.Client(base_url=root) as client:
        assert client.get("/healthz").json() == {"status": "ok"}


def test_unknown_scenario_is_model_not_found_naming_every_scenario(small_mock_url):
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", json=ok(model="plann"))
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["param"]) == (404, "model_not_found", "model")
    assert "'plann'" in error["message"]
    assert all(name in error["message"] for name in SCENARIOS)


def test_missing_parameter_has_code_missing_required_parameter(small_mock_url):
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", json={"model": "plan"})
    assert response.json()["error"]["code"] == "missing_required_parameter"


def test_413_names_the_limit(small_mock_url):
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", content=OVERSIZED, headers=JSON)
    assert str(LIMIT) in response.json()["error"]["message"]


def test_body_just_under_the_limit_is_served(small_mock_url):
    body = json.dumps(ok(padding="x" * (LIMIT - 1000))).encode()
    assert len(body) <= LIMIT
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", content=body, headers=JSON)
    assert response.status_code == 200


def test_json_content_type_with_charset_is_accepted(small_mock_url):
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post(
            "/chat/completions",
            content=json.dumps(ok()).encode(),
            headers={"content-type": "application/json; charset=utf-8"},
        )
    assert response.status_code == 200


@pytest.mark.parametrize("value", ["abc", "-1", "", "\u00b2", "\u00b9\u00b2", "9" * 5000])
def test_odd_attempt_headers_count_as_the_first_attempt(small_mock_url, value):
    """A header a client garbles must not crash the server (Latin-1 superscripts pass str.isdigit)."""
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post(
            "/chat/completions",
            json=ok(model="plan+fault=429"),
            headers={"x-lab-attempt": value.encode("latin-1")},
        )
    assert response.status_code == 429, response.text


@pytest.mark.parametrize("option", ["latency=1e300", "latency=-1", "rate=0.001", "retry=9e9", "latency=nan"])
def test_an_option_that_would_hold_a_connection_for_ever_is_refused(small_mock_url, option):
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", json=ok(model=f"plan+{option}"))
    assert response.status_code == 400 and response.json()["error"]["param"] == "model"


# A non-tool message's tool_call_id is not checked (it is counted, whatever it is), and a list of
# parts whose text is not a string is one value the count cannot read. Counting happens while
# the messages are read, so it must not answer before the checks that follow it do.
UNREADABLE_ID = {"role": "user", "content": "hi", "tool_call_id": [{"text": 1}]}


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "plan", "messages": [UNREADABLE_ID, {"role": "robot"}]}, 400, "messages[1].role"),
        ({"model": "plan", "messages": [UNREADABLE_ID, {"role": "tool"}]}, 400, "messages[1].tool_call_id"),
        ({"model": "plann", "messages": [UNREADABLE_ID]}, 404, "model"),
        ({"model": "plan+latency=-1", "messages": [UNREADABLE_ID]}, 400, "model"),
    ],
    ids=["later_bad_role", "later_missing_call_id", "unknown_model", "bad_option"],
)
def test_a_message_counting_cannot_read_does_not_hide_the_error_a_later_check_answers(
    small_mock_url, body, status, param
):
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", json=body)
    assert (response.status_code, response.json()["error"]["param"]) == (status, param), response.text


def test_a_non_tool_message_with_a_tool_call_id_counting_once_failed_on_is_answered(small_mock_url):
    # Not checked on a non-tool role (it never was), so it is counted as its JSON, as any other
    # odd value there always was; it used to be a 500 (o200k.text_of raised on it).
    with httpx.Client(base_url=small_mock_url) as client:
        response = client.post("/chat/completions", json={"model": "plan", "messages": [UNREADABLE_ID]})
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["prompt_tokens"] == o200k.prompt_tokens([UNREADABLE_ID])


def _posted_with_length(url: str, path: str, body: bytes, length: bytes) -> tuple[int, bytes]:
    """POST `body` to `path` over a plain socket, declaring `length` as its Content-Length
    (httpx writes its own); the reply's status and body."""
    origin = httpx.URL(url)
    with socket.create_connection((origin.host, origin.port), timeout=10) as sock:
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %s\r\n\r\n%s" % (path.encode(), length, body))
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, content = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), content


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/o/latency=0/v1/chat/completions",
                                  "/v1/responses"])
def test_a_content_length_with_thousands_of_leading_zeros_declares_its_value(small_mock_url, path):
    """Content-Length is any run of digits (RFC 9110): leading zeros past Python's 4,300-digit
    `int` limit still declare the body that follows, as the server's HTTP parser reads them."""
    body = json.dumps(ok() if "chat" in path else {"model": "plan", "input": "hi"}).encode()
    status, content = _posted_with_length(small_mock_url, path, body, b"0" * 4400 + b"%d" % len(body))
    assert status == 200, content[:300]
    # Refused on its declared length alone, before any of it is sent.
    status, content = _posted_with_length(small_mock_url, path, b"", b"0" * 4400 + b"%d" % (LIMIT + 1))
    assert status == 413 and json.loads(content)["error"]["code"] == "request_too_large"
