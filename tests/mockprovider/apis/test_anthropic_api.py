"""POST /v1/messages: the official `anthropic` client drives the scripts through the Messages API."""

from __future__ import annotations

import itertools
import json
import logging

import anthropic
import httpx
import openai
import pytest
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated, run_docs_snippet
from hypothesis import given
from hypothesis import strategies as st

import o200k
from mockprovider.scripts.scenarios import ANSWER_PLAN

QUESTION = "Which file mentions a timeout?"
SYSTEM = "You answer questions about log files."
TOOLS = [
    {"name": "list_files", "description": "List the files.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "read_file", "description": "Read one file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
]
RESULTS = {"list_files": "errors.log\naccess.log\nnotes.txt", "read_file": "worker 7 timed out"}
EVENTS = [
    "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
    "message_stop",
]


def _root(mock_url: str) -> str:
    """The Anthropic client's base URL: it appends `/v1/messages` itself."""
    return mock_url.removesuffix("/v1")


def _client(mock_url: str, **kwargs) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=_root(mock_url), **{"api_key": "unused", "max_retries": 0, **kwargs})


def _chat_tools() -> list[dict]:
    """The same tools as a chat client sends them, written out independently of the mock."""
    return [
        {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                          "parameters": t["input_schema"]}}
        for t in TOOLS
    ]


def _drive_plan(client: anthropic.Anthropic, *, stream: bool) -> tuple[list, list[dict]]:
    """Three turns of `plan`, each reply and its tool_result blocks fed back.

    Returns the messages and, beside them, the chat-shaped conversation each request stood for
    (built here, not by the mock), for counting tokens independently.
    """
    messages: list[dict] = [{"role": "user", "content": QUESTION}]
    chat: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    replies, conversations = [], []
    for _ in range(3):
        kwargs = {"model": "plan", "system": SYSTEM, "max_tokens": 1024, "messages": messages, "tools": TOOLS}
        if stream:
            with client.messages.stream(**kwargs) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        replies.append(reply)
        conversations.append(list(chat))
        uses = [b for b in reply.content if b.type == "tool_use"]
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": RESULTS[b.name]} for b in uses
        ]})
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": b.id, "type": "function",
             "function": {"name": b.name, "arguments": json.dumps(b.input, separators=(",", ":"))}}
            for b in uses
        ]})
        chat += [{"role": "tool", "tool_call_id": b.id, "content": RESULTS[b.name]} for b in uses]
    return replies, conversations


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_official_client_drives_plan_to_the_scripted_answer(mock_url, stream):
    with _client(mock_url) as client:
        replies, _ = _drive_plan(client, stream=stream)
    uses = [(b.id, b.name, b.input) for r in replies[:2] for b in r.content]
    assert uses == [("c1", "list_files", {}), ("c2", "read_file", {"path": "errors.log"})]
    assert [r.stop_reason for r in replies] == ["tool_use", "tool_use", "end_turn"]
    assert replies[-1].content[0].text == ANSWER_PLAN
    assert all(r.type == "message" and r.role == "assistant" and r.model == "plan" for r in replies)


def test_usage_is_the_chat_formula_and_input_tokens_grow_by_exactly_what_was_appended(mock_url):
    with _client(mock_url) as client:
        replies, conversations = _drive_plan(client, stream=False)
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as chat_client:
        chat_replies = [
            chat_client.chat.completions.create(model="plan", messages=c, tools=_chat_tools())
            for c in conversations
        ]
    inputs = [r.usage.input_tokens for r in replies]
    assert inputs == [o200k.prompt_tokens(c, _chat_tools()) for c in conversations]
    for t in (1, 2):
        appended = conversations[t][len(conversations[t - 1]):]
        assert inputs[t] - inputs[t - 1] == sum(o200k.message_tokens(m) for m in appended)
    assert [r.usage.output_tokens for r in replies] == [c.usage.completion_tokens for c in chat_replies]


def test_streamed_and_created_messages_are_the_same(mock_url):
    with _client(mock_url) as client:
        streamed, _ = _drive_plan(client, stream=True)
        created, _ = _drive_plan(client, stream=False)

    def essence(m) -> tuple:
        return [b.model_dump() for b in m.content], m.stop_reason, m.usage.input_tokens, m.usage.output_tokens

    assert [essence(m) for m in streamed] == [essence(m) for m in created]


def _raw_events(client: anthropic.Anthropic, messages: list[dict], **kwargs) -> list:
    kwargs.setdefault("tools", TOOLS)
    with client.messages.create(model="plan", max_tokens=1024, messages=messages, stream=True, **kwargs) as s:
        return list(s)


ANSWER_TURN = [
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "content": "Listing."},
    {"role": "user", "content": "go on"},
    {"role": "assistant", "content": "Reading."},
    {"role": "user", "content": "go on"},
]


def test_stream_emits_the_documented_event_sequence(mock_url):
    with _client(mock_url) as client:
        call = _raw_events(client, [{"role": "user", "content": QUESTION}])
        text = _raw_events(client, ANSWER_TURN)
    for events in (call, text):
        assert [kind for kind, _ in itertools.groupby(e.type for e in events)] == EVENTS
    assert call[1].content_block.type == "tool_use" and call[1].content_block.id == "c1"
    assert "".join(e.delta.partial_json for e in call if e.type == "content_block_delta") == "{}"
    assert "".join(e.delta.text for e in text if e.type == "content_block_delta") == ANSWER_PLAN
    final = text[-2]
    assert final.delta.stop_reason == "end_turn"
    assert final.usage.output_tokens == o200k.count(ANSWER_PLAN)
    assert text[0].message.stop_reason is None and text[0].message.usage.input_tokens > 0


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_max_tokens_cuts_the_reply_with_stop_reason_max_tokens(mock_url, stream):
    with _client(mock_url) as client:
        if stream:
            with client.messages.stream(model="plan", max_tokens=4, messages=ANSWER_TURN) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(model="plan", max_tokens=4, messages=ANSWER_TURN)
    enc = o200k.encoding()
    assert reply.stop_reason == "max_tokens"
    assert reply.content[0].text == enc.decode(enc.encode(ANSWER_PLAN)[:4])
    assert reply.usage.output_tokens == 4


def test_official_client_retries_past_a_429_by_itself(mock_url, caplog):
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = "plan+fault=429@0x1"
    question = [{"role": "user", "content": QUESTION}]
    with _client(mock_url) as client, pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(model=model, max_tokens=100, messages=question, tools=TOOLS)
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    caplog.clear()
    with _client(mock_url, max_retries=2) as client:
        reply = client.messages.create(model=model, max_tokens=100, messages=question, tools=TOOLS)
    assert reply.content[0].id == "c1"
    assert [r.getMessage() for r in caplog.records if "turn=0" in r.getMessage()] == [
        f"model={model} turn=0 attempt=0 status=429",
        f"model={model} turn=0 attempt=1 status=ok",
    ]


def test_options_in_the_base_url_prefix_apply(mock_url):
    with _client(mock_url.replace("/v1", "/o/fault=500/v1")) as client:
        with pytest.raises(anthropic.InternalServerError) as caught:
            client.messages.create(model="plan", max_tokens=100, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["error"]["type"] == "api_error"


def test_api_key_is_accepted_as_x_api_key(keyed_mock_url):
    question = [{"role": "user", "content": QUESTION}]
    with _client(keyed_mock_url, api_key="wrong") as client:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            client.messages.create(model="plan", max_tokens=100, messages=question)
    assert caught.value.body["error"]["type"] == "authentication_error"
    with _client(keyed_mock_url, api_key="secret") as client:
        reply = client.messages.create(model="plan", max_tokens=100, messages=question, tools=TOOLS)
    assert reply.stop_reason == "tool_use"


USER = {"role": "user", "content": "hi"}
USE = {"type": "tool_use", "id": "c1", "name": "list_files", "input": {}}


def ok(**fields) -> dict:
    return {"model": "plan", "max_tokens": 100, "messages": [USER], **fields}


def answered(result: dict) -> list[dict]:
    return [USER, {"role": "assistant", "content": [USE]}, {"role": "user", "content": [result]}]


BAD = {
    "malformed_json": b'{"model": "plan",',
    "body_is_array": [ok()],
    "missing_model": {"max_tokens": 100, "messages": [USER]},
    "missing_max_tokens": {"model": "plan", "messages": [USER]},
    "max_tokens_zero": ok(max_tokens=0),
    "max_tokens_string": ok(max_tokens="100"),
    "missing_messages": {"model": "plan", "max_tokens": 100},
    "empty_messages": ok(messages=[]),
    "bad_role": ok(messages=[{"role": "system", "content": "hi"}]),
    "empty_content": ok(messages=[{"role": "user", "content": []}]),
    "image_block": ok(messages=[{"role": "user", "content": [{"type": "image"}]}]),
    "tool_use_in_user_message": ok(messages=[{"role": "user", "content": [USE]}]),
    "tool_use_input_not_object": ok(messages=[USER, {"role": "assistant", "content": [{**USE, "input": 1}]}]),
    "tool_result_answers_nothing": ok(messages=[
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "x"}]}
    ]),
    "tool_result_content_not_text": ok(messages=answered(
        {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "image"}]}
    )),
    "system_not_text": ok(system=5),
    "server_tool": ok(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
    "tool_without_schema": ok(tools=[{"name": "list_files"}]),
    "stream_not_bool": ok(stream="yes"),
    "bad_options": ok(model="plan+fault=nope"),
    "unknown_model": ok(model="plann"),
}
"""Each answered 400 `invalid_request_error`, except the unknown model: 404 `not_found_error`."""


def _assert_anthropic_error(response: httpx.Response, status: int, kind: str) -> None:
    body = response.json()
    assert response.status_code == status
    assert set(body) == {"type", "error", "request_id"} and body["type"] == "error"
    assert body["request_id"] == response.headers["request-id"]
    assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == kind
    assert body["error"]["message"]


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
def test_bad_input_gets_an_anthropic_shaped_error_never_a_500(mock_url, body):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(base_url=_root(mock_url)) as client:
        headers = {"content-type": "application/json"}
        response = client.post("/v1/messages", content=content, headers=headers)
        assert client.get("/v1/models").status_code == 200, "the server keeps serving"
    if body is BAD["unknown_model"]:
        _assert_anthropic_error(response, 404, "not_found_error")
    else:
        _assert_anthropic_error(response, 400, "invalid_request_error")


def test_transport_level_errors_are_anthropic_shaped_too(serve_mock):
    limit, key = 10_000, {"x-api-key": "secret"}
    cases = [
        ("POST", {"json": ok()}, 401, "authentication_error"),
        ("POST", {"json": ok(), "headers": {"x-api-key": "no"}}, 401, "authentication_error"),
        ("POST", {"content": b"{}", "headers": key}, 415, "invalid_request_error"),
        ("POST", {"json": ok(padding="x" * limit), "headers": key}, 413, "request_too_large"),
        ("GET", {"headers": key}, 405, "invalid_request_error"),
    ]
    with serve_mock(max_body_bytes=limit, api_key="secret") as url, httpx.Client(base_url=_root(url)) as http:
        for method, kwargs, status, kind in cases:
            _assert_anthropic_error(http.request(method, "/v1/messages", **kwargs), status, kind)
        assert http.post("/v1/messages", json=ok(), headers=key).status_code == 200


def test_tool_result_answering_nothing_names_the_block(mock_url):
    bad = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "x"}]}]
    with _client(mock_url) as client, pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="plan", max_tokens=100, messages=bad)
    assert "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: zz." in (
        caught.value.message
    )


def test_readme_snippet_runs_as_written(capsys):
    run_docs_snippet("Anthropic Messages")
    assert ANSWER_PLAN in capsys.readouterr().out


# --- hostile input: generated bodies, never a 500 ------------------------------------------------

BLOCK = (
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT | JSON_VALUE})
    | st.fixed_dictionaries({"type": st.just("tool_use"), "id": st.just("c1") | TEXT,
                             "name": TEXT | JSON_VALUE,
                             "input": st.dictionaries(TEXT, JSON_VALUE) | JSON_VALUE})
    | st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": st.just("c1") | TEXT},
                            optional={"content": TEXT | st.lists(JSON_VALUE, max_size=2) | JSON_VALUE})
    | JSON_VALUE
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]) | JSON_VALUE,
     "content": TEXT | st.lists(BLOCK, max_size=3)}
)
PLAUSIBLE = st.fixed_dictionaries(
    {"model": st.sampled_from(["plan", "recover", "research", "destructive"]),
     "max_tokens": st.integers(1, 40),
     "messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                                 "content": TEXT}), min_size=1, max_size=4)},
    optional={"system": TEXT, "stream": st.booleans(),
              "tools": st.lists(st.fixed_dictionaries({"name": TEXT, "input_schema": st.just({})}),
                                max_size=2)},
)
WILD = st.fixed_dictionaries(
    {"model": st.sampled_from(["plan", "plan+latency=0"]) | TEXT, "messages": st.lists(MESSAGE, max_size=4)},
    optional={
        "max_tokens": st.integers(-2, 40) | JSON_VALUE,
        "system": TEXT | st.lists(BLOCK, max_size=2) | JSON_VALUE,
        "tools": st.lists(st.dictionaries(st.sampled_from(["name", "input_schema", "type"]), JSON_VALUE))
        | JSON_VALUE,
        "stream": st.booleans() | JSON_VALUE,
    },
)


@FUZZ
@given(body=PLAUSIBLE | WILD)
def test_generated_bodies_get_a_message_or_an_anthropic_error_never_a_500(in_process, body):
    response = post_generated(in_process, "/v1/messages", body)
    if response.status_code == 200 and body.get("stream") is True:
        assert response.text.endswith('event: message_stop\ndata: {"type":"message_stop"}\n\n')
    elif response.status_code == 200:
        assert response.json()["type"] == "message"
    else:
        assert 400 <= response.status_code < 500
        assert response.json()["type"] == "error" and response.json()["error"]["message"]


WEATHER = [{"name": "get_weather", "input_schema": {"type": "object"}}]
CITY = {"name": "city", "turns": [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}}]},
    {"tool_calls": [{"name": "get_weather", "arguments": "city=Paris"}]},
    {"content": "done"},
]}


def _turn_one() -> list[dict]:
    """CITY's first call, as the mock makes it, answered."""
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_0_0", "name": "get_weather",
                                           "input": {"city": "Zürich"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_0_0", "content": "sunny"}]},
    ]


def test_tool_input_fed_back_counts_as_the_chat_route_counts_the_same_arguments(serve_mock):
    # The chat route sends the file's arguments as compact JSON with "ü" unescaped, and its
    # client echoes them verbatim; the same call fed back as a tool_use block must count the same.
    turn_one = _turn_one()
    with serve_mock(scenario_files=[CITY]) as url, _client(url) as client:
        first = client.messages.create(model="city", max_tokens=100, messages=turn_one[:1], tools=WEATHER)
        (use,) = first.content  # what turn_one feeds back
        second = client.messages.create(model="city", max_tokens=100, messages=turn_one, tools=WEATHER)
    chat = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": use.id, "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city":"Zürich"}'}}]},
        {"role": "tool", "tool_call_id": use.id, "content": "sunny"},
    ]
    assert (use.id, use.input) == ("call_0_0", {"city": "Zürich"})
    chat_tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    assert second.usage.input_tokens == o200k.prompt_tokens(chat, chat_tools)


def test_arguments_that_are_no_json_object_stream_as_the_input_create_returns(serve_mock):
    # A file may script broken JSON arguments; Messages carries an object, so create() answers
    # `{}` and the stream must too: the official client refuses a partial_json it cannot parse.
    turn_one = _turn_one()
    with serve_mock(scenario_files=[CITY]) as url, _client(url) as client:
        created = client.messages.create(model="city", max_tokens=100, messages=turn_one, tools=WEATHER)
        with client.messages.stream(model="city", max_tokens=100, messages=turn_one, tools=WEATHER) as events:
            streamed = events.get_final_message()
    assert [(b.id, b.name, b.input) for b in created.content] == [("call_1_0", "get_weather", {})]
    assert [b.model_dump() for b in streamed.content] == [b.model_dump() for b in created.content]
