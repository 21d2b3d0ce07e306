"""Scenario file replies through the official clients: text and tool calls together, scripted
errors in each format's own shape, per-reply pacing, recorded usage, and `fault=none`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from hypothesis import example, given, settings
from hypothesis import strategies as st

import o200k
from mockprovider.app import create_app
from mockprovider.scripts.files import ScenarioFileError, load_scenarios
from mockprovider.server import serve_in_thread

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
MESSAGES_TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]
BOTH = {"content": "Let me check the weather.", "tool_calls": [
    {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "w1"}]}
SCENARIOS = [
    {"name": "both", "turns": [BOTH, {"content": "Sunny."}]},
    {"name": "limited", "turns": [{"error": {
        "status": 429, "type": "rate_limit_error", "code": "slow_down",
        "message": "Too many requests, scripted.",
        "headers": {"Retry-After": "7", "x-scripted": "yes"}}}]},
    {"name": "drained", "turns": [{"error": {
        "status": 429, "message": "Out of tokens, scripted.",
        "headers": {"x-ratelimit-remaining-tokens": "0", "x-request-id": "req_scripted",
                    "anthropic-ratelimit-tokens-remaining": "0", "request-id": "req_scripted"}}}]},
    {"name": "broken", "turns": [{"error": {"status": 503, "message": "Down for maintenance."}}]},
    {"name": "paced", "turns": [{"content": "one two three four five six", "chunk": 2, "rate": 1000,
                                 "latency": 300}]},
    {"name": "recorded", "turns": [{"content": "Hello there.",
                                    "usage": {"prompt_tokens": 111, "completion_tokens": 22}}]},
    {"name": "recorded_long", "turns": [
        {"content": "One.", "usage": {"prompt_tokens": 50, "completion_tokens": 2}},
        {"content": "Two.", "usage": {"prompt_tokens": 60, "completion_tokens": 2}}]},
    {"name": "flaky", "options": "fault=500", "turns": [{"content": "fine"}]},
]
HI = [{"role": "user", "content": "Weather in Paris?"}]


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    """The mock's root URL (no /v1), serving SCENARIOS."""
    with serve_in_thread(create_app(scenario_files=SCENARIOS)) as url:
        yield url.removesuffix("/v1")


@pytest.fixture(scope="module")
def clients(base: str) -> Iterator[tuple[openai.OpenAI, anthropic.Anthropic]]:
    with (openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0) as chat,
          anthropic.Anthropic(base_url=base, api_key="k", max_retries=0) as messages):
        yield chat, messages


@pytest.fixture
def oai(clients: tuple[openai.OpenAI, anthropic.Anthropic]) -> openai.OpenAI:
    return clients[0]


@pytest.fixture
def claude(clients: tuple[openai.OpenAI, anthropic.Anthropic]) -> anthropic.Anthropic:
    return clients[1]


def test_a_reply_carries_text_and_tool_calls_through_chat(oai: openai.OpenAI):
    reply = oai.chat.completions.create(model="both", messages=HI, tools=TOOLS)
    message = reply.choices[0].message
    assert message.content == "Let me check the weather."
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("w1", "get_weather", '{"city":"Paris"}')]
    assert reply.choices[0].finish_reason == "tool_calls"
    text = o200k.encoding().encode("Let me check the weather.")
    calls = o200k.call_fields_tokens((("w1", "get_weather", '{"city":"Paris"}'),))
    assert reply.usage.completion_tokens == len(text) + calls


def test_a_streamed_text_and_tool_reply_sends_the_text_before_the_calls(oai: openai.OpenAI):
    stream = oai.chat.completions.create(model="both", messages=HI, tools=TOOLS, stream=True)
    order, text, arguments = [], "", ""
    for chunk in stream:
        delta = chunk.choices[0].delta
        if delta.content:
            order.append("text")
            text += delta.content
        for call in delta.tool_calls or ():
            order.append("call")
            arguments += call.function.arguments or ""
    assert text == "Let me check the weather." and arguments == '{"city":"Paris"}'
    assert order.index("call") > max(i for i, kind in enumerate(order) if kind == "text")


def test_a_reply_carries_text_and_tool_calls_through_responses(oai: openai.OpenAI):
    for stream in (False, True):
        client = oai
        if stream:
            ask = {"model": "both", "input": "Weather in Paris?", "tools": RESPONSES_TOOLS}
            with client.responses.stream(**ask) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(model="both", input="Weather in Paris?", tools=RESPONSES_TOOLS)
        kinds = [item.type for item in response.output]
        assert kinds == ["message", "function_call"]
        assert response.output_text == "Let me check the weather."
        call = response.output[1]
        assert call.call_id == "w1" and json.loads(call.arguments) == {"city": "Paris"}


def test_a_reply_carries_text_and_tool_calls_through_messages(claude: anthropic.Anthropic):
    client = claude
    ask = {"model": "both", "max_tokens": 200, "messages": HI, "tools": MESSAGES_TOOLS}
    created = client.messages.create(**ask)
    with client.messages.stream(**ask) as stream:
        streamed = stream.get_final_message()
    for message in (created, streamed):
        assert [block.type for block in message.content] == ["text", "tool_use"]
        assert message.content[0].text == "Let me check the weather."
        assert (message.content[1].id, message.content[1].input) == ("w1", {"city": "Paris"})
        assert message.stop_reason == "tool_use"


def test_a_reply_carries_text_and_tool_calls_through_gemini_and_ollama(base: str):
    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
    offer = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="get_weather")])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    reply = client.models.generate_content(model="both", contents="Weather in Paris?", config=offer)
    streamed = list(client.models.generate_content_stream(model="both", contents="Weather in Paris?",
                                                          config=offer))
    parts = [p for chunk in streamed for p in chunk.candidates[0].content.parts]
    for shown in (reply.candidates[0].content.parts, parts):
        assert "".join(p.text for p in shown if p.text) == "Let me check the weather."
        assert [(p.function_call.name, p.function_call.args) for p in shown if p.function_call] == [
            ("get_weather", {"city": "Paris"})]
        assert shown[-1].function_call  # the text comes first
    with ollama.Client(host=base) as local:
        plain = local.chat(model="both", messages=HI, tools=TOOLS)
        pieces = list(local.chat(model="both", messages=HI, tools=TOOLS, stream=True))
    streamed_text = "".join(p.message.content or "" for p in pieces)
    assert plain.message.content == streamed_text == "Let me check the weather."
    for message in (plain.message, next(p.message for p in pieces if p.message.tool_calls)):
        assert [(c.function.name, c.function.arguments) for c in message.tool_calls] == [
            ("get_weather", {"city": "Paris"})]


def test_an_error_reply_reaches_the_gemini_and_ollama_clients(base: str):
    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=base))
    with pytest.raises(genai_errors.APIError) as gemini:
        client.models.generate_content(model="limited", contents="hi")
    assert gemini.value.code == 429 and gemini.value.message == "Too many requests, scripted."
    with ollama.Client(host=base) as local, pytest.raises(ollama.ResponseError) as caught:
        local.chat(model="limited", messages=HI)
    assert caught.value.status_code == 429 and "Too many requests, scripted." in caught.value.error


def test_the_text_and_tool_reply_fed_back_answers_the_next_turn(oai: openai.OpenAI):
    client = oai
    first = client.chat.completions.create(model="both", messages=HI, tools=TOOLS).choices[0].message
    messages = [*HI, first.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": "w1", "content": "sunny"}]
    second = client.chat.completions.create(model="both", messages=messages)
    assert second.choices[0].message.content == "Sunny."


def test_an_error_reply_has_its_status_type_message_and_headers_in_chat_and_responses(oai: openai.OpenAI):
    client = oai
    with pytest.raises(openai.RateLimitError) as chat:
        client.chat.completions.create(model="limited", messages=HI)
    with pytest.raises(openai.RateLimitError) as responses:
        client.responses.create(model="limited", input="hi")
    for caught in (chat.value, responses.value):
        assert caught.status_code == 429
        assert caught.body == {"message": "Too many requests, scripted.", "type": "rate_limit_error",
                               "param": None, "code": "slow_down"}
        assert caught.response.headers["retry-after"] == "7"
        assert caught.response.headers["x-scripted"] == "yes"


def test_an_error_reply_takes_anthropics_shape_on_messages(claude: anthropic.Anthropic):
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(model="limited", max_tokens=10, messages=HI)
    assert caught.value.body == {"type": "error", "error": {"type": "rate_limit_error",
                                                            "message": "Too many requests, scripted."},
                                 "request_id": caught.value.response.headers["request-id"]}
    assert caught.value.response.headers["retry-after"] == "7"
    with pytest.raises(anthropic.InternalServerError) as down:
        claude.messages.create(model="broken", max_tokens=10, messages=HI)
    assert down.value.status_code == 503
    assert down.value.body["error"] == {"type": "api_error", "message": "Down for maintenance."}


def test_an_error_reply_without_a_type_gets_one_from_its_status(oai: openai.OpenAI):
    with pytest.raises(openai.InternalServerError) as caught:
        oai.chat.completions.create(model="broken", messages=HI)
    assert caught.value.status_code == 503 and caught.value.body["type"] == "server_error"


def test_a_reply_streams_in_chunks_of_its_own_size(oai: openai.OpenAI):
    pieces = [c.choices[0].delta.content for c in oai.chat.completions.create(
        model="paced", messages=HI, stream=True) if c.choices and c.choices[0].delta.content]
    tokens = o200k.encoding().encode("one two three four five six")
    assert "".join(pieces) == "one two three four five six"
    assert len(pieces) == (len(tokens) + 1) // 2  # two tokens per delta


def test_chunks_hold_the_same_tokens_in_responses_and_messages_streams(oai: openai.OpenAI,
                                                                       claude: anthropic.Anthropic):
    expected = (len(o200k.encoding().encode("one two three four five six")) + 1) // 2
    with oai.responses.stream(model="paced", input="go") as events:
        texts = [e.delta for e in events if e.type == "response.output_text.delta"]
    with claude.messages.stream(model="paced", max_tokens=50, messages=HI) as stream:
        blocks = list(stream.text_stream)
    assert "".join(texts) == "".join(blocks) == "one two three four five six"
    assert len(texts) == len(blocks) == expected


def test_a_replys_latency_delays_its_first_byte(base: str):
    # A lower bound only: the reply cannot arrive before its scripted latency has passed.
    started = time.monotonic()
    with httpx.Client() as http:
        http.post(f"{base}/v1/chat/completions", json={"model": "paced", "messages": HI}).raise_for_status()
    assert time.monotonic() - started >= 0.3


def test_recorded_usage_is_served_only_when_asked(oai: openai.OpenAI, claude: anthropic.Anthropic):
    client = oai
    counted = client.chat.completions.create(model="recorded", messages=HI).usage
    recorded = client.chat.completions.create(model="recorded+usage=recorded", messages=HI).usage
    assert (recorded.prompt_tokens, recorded.completion_tokens) == (111, 22)
    assert counted.completion_tokens == len(o200k.encoding().encode("Hello there."))
    assert counted.prompt_tokens == o200k.prompt_tokens(HI, None)
    message = claude.messages.create(model="recorded+usage=recorded", max_tokens=50, messages=HI)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (111, 22)


LONG = " ".join(f"Rule {i}: check the log before answering." for i in range(160))


def test_recorded_usage_never_reports_more_cached_than_prompt_tokens(oai: openai.OpenAI,
                                                                     claude: anthropic.Anthropic):
    # The counted prompt is long enough to cache; the recorded one is far shorter.
    chat = [{"role": "system", "content": LONG}, *HI, {"role": "assistant", "content": "One."},
            {"role": "user", "content": "And tomorrow?"}]
    usage = oai.chat.completions.create(model="recorded_long+usage=recorded", messages=chat).usage
    assert usage.prompt_tokens == 60
    assert usage.prompt_tokens_details.cached_tokens <= usage.prompt_tokens
    mark = {"type": "ephemeral"}
    again = {"type": "text", "text": "And tomorrow?", "cache_control": mark}
    message = claude.messages.create(
        model="recorded_long+usage=recorded", max_tokens=50,
        system=[{"type": "text", "text": LONG, "cache_control": mark}],
        messages=[*HI, {"role": "assistant", "content": "One."},
                  {"role": "user", "content": [again]}])
    u = message.usage
    assert min(u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens) >= 0
    assert u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens == 60


def test_a_scripted_errors_own_rate_limit_headers_are_not_doubled(base: str):
    """A script that drains the tokens states 0 left, once: a client reads one figure, not "0, 30000000"."""
    with httpx.Client() as http:
        chat = http.post(f"{base}/v1/chat/completions", json={"model": "drained", "messages": HI})
        messages = http.post(f"{base}/v1/messages",
                             json={"model": "drained", "max_tokens": 9, "messages": HI})
    assert chat.headers.get_list("x-ratelimit-remaining-tokens") == ["0"]
    assert chat.headers.get_list("x-request-id") == ["req_scripted"]
    assert chat.headers.get_list("x-ratelimit-limit-tokens") == ["30000000"]  # the rest still stated
    assert messages.headers.get_list("anthropic-ratelimit-tokens-remaining") == ["0"]
    assert messages.headers.get_list("request-id") == ["req_scripted"]


def test_fault_none_switches_the_files_fault_off_for_one_request(oai: openai.OpenAI):
    client = oai
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="flaky", messages=HI)
    spared = client.chat.completions.create(model="flaky+fault=none", messages=HI)
    assert spared.choices[0].message.content == "fine"
    headers = {"x-mock-options": "fault=none"}
    assert client.chat.completions.create(
        model="flaky", messages=HI, extra_headers=headers).choices[0].message.content == "fine"
    # A later source may fault again after switching the earlier ones off.
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="flaky+fault=none+fault=429", messages=HI)


# --- any document: served, or refused in one line ------------------------------------------------

_SCALARS = st.none() | st.booleans() | st.integers(-10, 700) | st.floats(allow_nan=True) | st.text(max_size=8)
_KEYS = st.sampled_from([
    "content", "tool_calls", "error", "latency", "rate", "chunk", "usage", "if", "status", "message",
    "type", "code", "headers", "prompt_tokens", "completion_tokens", "name", "arguments", "id",
    "not", "all", "any", "has_tool", "turn_at_least", "last_user_matches", "after_tool_result",
    "fixtures", "match", "response", "toolCalls", "userMessage", "turnIndex", "blocks", "streamingProfile",
])
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(turn=_VALUES)
def test_any_reply_document_loads_or_is_refused_with_a_scenario_file_error(turn: Any):
    try:
        load_scenarios([{"name": "fuzz", "turns": [turn]}])
    except ScenarioFileError as e:
        assert str(e).startswith("<inline scenario 1>: $") and "\n" not in str(e)


@settings(max_examples=300, deadline=None)
@given(fixtures=_VALUES)
def test_any_aimock_document_loads_or_is_refused_with_a_scenario_file_error(fixtures: Any):
    try:
        load_scenarios([{"fixtures": fixtures}])
    except ScenarioFileError as e:
        assert str(e).startswith("<inline scenario 1>: $") and "\n" not in str(e)


# A delta waits for the tokens it holds: a short reply under a huge `chunk` is one delta of a
# few tokens. Waiting `chunk / rate` per delta instead stalled it for days.
STALLING = {"name": "stalling", "turns": [{"content": "Hi.", "chunk": 1_000_000, "rate": 100,
                                           "tool_calls": [{"name": "f", "arguments": {"q": 1}}]}]}
STREAMS = {
    "chat": ("/v1/chat/completions", {"model": "stalling", "messages": HI, "stream": True}),
    "responses": ("/v1/responses", {"model": "stalling", "input": "hi", "stream": True}),
    "messages": ("/v1/messages", {"model": "stalling", "max_tokens": 50, "messages": HI, "stream": True}),
    "gemini": ("/v1beta/models/stalling:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    "ollama": ("/api/chat", {"model": "stalling", "messages": HI}),
}


@pytest.mark.parametrize("wire_format", STREAMS)
def test_a_delta_waits_for_the_tokens_it_holds_not_the_chunk_size(wire_format: str):
    path, body = STREAMS[wire_format]
    with serve_in_thread(create_app(scenario_files=[STALLING])) as url, httpx.Client(timeout=20) as http:
        with http.stream("POST", url.removesuffix("/v1") + path, json=body) as response:
            assert response.status_code == 200
            assert b"Hi." in b"".join(response.iter_bytes())


@pytest.fixture(scope="module")
def swappable() -> Iterator[tuple[str, Any]]:
    """A real server (its HTTP protocol checks what a response may carry) whose app's scenarios
    a test swaps per example."""
    app = create_app()
    with serve_in_thread(app) as url:
        yield url, app


# Header names mostly valid; values of letters beside what HTTP framing cares about: spaces,
# separators, controls, DEL, Latin-1 and beyond.
_HEADER_NAME = st.sampled_from(["x-a", "Retry-After", "retry-after", "x b", "Content-Encoding"])
_HEADER_VALUE = st.text(st.sampled_from("aZ- ;\t\r\n\x7féÿĀ"), max_size=4)


@settings(max_examples=60, deadline=None)
@example(status=503, headers={"x-a": "a\x7f"})  # the connection was dropped, with no response
@example(status=503, headers={"x-a": " a"})  # likewise under --http h11; trimmed under httptools
@example(status=503, headers={"Content-Encoding": "gzip"})  # a plain body the client cannot decode
@given(status=st.integers(400, 599) | st.sampled_from([200, 399, 600]),
       headers=st.dictionaries(_HEADER_NAME, _HEADER_VALUE, max_size=3))
def test_an_error_reply_that_loads_is_answered_with_its_status(swappable: tuple[str, Any], status: int,
                                                               headers: dict[str, str]):
    # Loading is the only check: whatever passes it must reach the client as sent, never as a
    # dropped connection or a 500.
    url, app = swappable
    error = {"status": status, "message": "m", "headers": headers}
    document = {"name": "scripted", "turns": [{"error": error}]}
    try:
        app.state.config = create_app(scenario_files=[document]).state.config
    except ScenarioFileError:
        return
    answer = httpx.post(f"{url}/chat/completions", json={"model": "scripted", "messages": HI}, timeout=10)
    assert answer.status_code == status
    sent = dict(answer.headers.raw)
    assert all(sent[name.lower().encode()] == value.encode("latin-1") for name, value in headers.items())
