"""Generation parameters: max_tokens cuts, SSE chunk shape, sampling parameters, streaming rate."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

import o200k as tokens

PLAN_ANSWER = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
USER = {"role": "user", "content": "Which file mentions a timeout?"}
# The conversation that brings `plan` to turn 1 (read_file) and to turn 2 (the text answer).
TURN1 = [
    USER,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "errors.log\naccess.log"},
]
TURN2 = TURN1 + [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"errors.log"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "worker 7 timed out"},
]


TOOLS = [{"type": "function", "function": {"name": n}} for n in ("list_files", "read_file")]
"""Offered in every request here: without tools, a real model (and the mock) answers in text."""


def _post(url: str, body: dict) -> dict:
    with httpx.Client(base_url=url) as client:
        response = client.post("/chat/completions", json={"tools": TOOLS, **body})
    assert response.status_code == 200, response.text
    return response.json()


def _sse(url: str, body: dict) -> list:
    """The raw `data:` payloads of a streamed response, `[DONE]` kept as a string."""
    with (
        httpx.Client(base_url=url) as client,
        client.stream("POST", "/chat/completions", json={"tools": TOOLS, **body, "stream": True}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    return [p if p == "[DONE]" else json.loads(p) for p in (line[len("data: ") :] for line in lines)]


def _reassemble(events: list) -> tuple[str | None, list[dict], str | None, dict | None]:
    content, calls, finish, usage = None, {}, None, None
    for event in events[:-1]:
        if event.get("usage"):
            usage = event["usage"]
        for choice in event["choices"]:
            delta = choice["delta"]
            if delta.get("content"):
                content = (content or "") + delta["content"]
            for tc in delta.get("tool_calls") or ():
                slot = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                slot["id"] = tc.get("id") or slot["id"]
                slot["name"] += tc.get("function", {}).get("name") or ""
                slot["arguments"] += tc.get("function", {}).get("arguments") or ""
            finish = choice["finish_reason"] or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_cuts_a_text_reply_with_finish_reason_length(mock_url, param):
    body = _post(mock_url, {"model": "plan", "messages": TURN2, param: 5})
    choice = body["choices"][0]
    assert body["usage"]["completion_tokens"] == 5
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "errors.log mentions a timeout"
    assert PLAN_ANSWER.startswith(choice["message"]["content"])
    assert tokens.count(choice["message"]["content"]) == 5


# The wire JSON of plan's turn-1 call is 29 tokens; 26 leaves room for the call but not all
# of its arguments.
CUT_CALL = 26


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_cuts_tool_call_arguments_too(mock_url, param):
    body = _post(mock_url, {"model": "plan", "messages": TURN1, param: CUT_CALL})
    choice = body["choices"][0]
    (call,) = choice["message"]["tool_calls"]
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == CUT_CALL
    assert call["id"] == "c2"
    assert call["function"]["name"] == "read_file"
    full = '{"path":"errors.log"}'
    assert full.startswith(call["function"]["arguments"]) and call["function"]["arguments"] != full
    assert tokens.count(tokens.tool_calls_json([call])) <= CUT_CALL


def test_max_tokens_below_one_call_shows_no_call_but_bills_the_limit(mock_url):
    body = _post(mock_url, {"model": "plan", "messages": TURN1, "max_tokens": 5})
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert "tool_calls" not in choice["message"] and choice["message"]["content"] is None
    assert body["usage"]["completion_tokens"] == 5


def test_max_tokens_of_exactly_the_reply_length_does_not_cut(mock_url):
    size = tokens.count(PLAN_ANSWER)
    body = _post(mock_url, {"model": "plan", "messages": TURN2, "max_tokens": size})
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["choices"][0]["message"]["content"] == PLAN_ANSWER
    assert body["usage"]["completion_tokens"] == size


def test_max_completion_tokens_wins_over_max_tokens(mock_url):
    body = _post(
        mock_url, {"model": "plan", "messages": TURN2, "max_tokens": 100, "max_completion_tokens": 3}
    )
    assert body["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(("messages", "limit"), [(TURN1, CUT_CALL), (TURN2, 5)], ids=["tool_call", "text"])
def test_streaming_with_max_tokens_matches_non_streaming(mock_url, messages, limit):
    request = {"model": "plan", "messages": messages, "max_tokens": limit}
    plain = _post(mock_url, request)
    content, calls, finish, usage = _reassemble(
        _sse(mock_url, {**request, "stream_options": {"include_usage": True}})
    )
    message = plain["choices"][0]["message"]
    assert finish == plain["choices"][0]["finish_reason"] == "length"
    assert usage == plain["usage"]
    assert content == message["content"]
    assert calls == [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in message.get("tool_calls") or ()
    ]


def test_completion_tokens_count_text_and_tool_calls(mock_url):
    text = _post(mock_url, {"model": "plan", "messages": TURN2})
    assert text["usage"]["completion_tokens"] == tokens.count(PLAN_ANSWER)
    call = _post(mock_url, {"model": "plan", "messages": TURN1})
    wire = (
        '[{"id":"c2","type":"function","function":'
        '{"name":"read_file","arguments":"{\\"path\\":\\"errors.log\\"}"}}]'
    )
    assert call["usage"]["completion_tokens"] == tokens.count(wire) == 29  # the chapter's figure
    first = _post(mock_url, {"model": "plan", "messages": [USER]})
    assert first["usage"]["completion_tokens"] == 23  # list_files {} under id c1, as in the chapter


def test_sse_stream_has_openai_chunk_shape(mock_url):
    events = _sse(mock_url, {"model": "plan", "messages": TURN1, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    header = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert header == {
        "index": 0,
        "id": "c2",
        "type": "function",
        "function": {"name": "read_file", "arguments": ""},
    }
    final, usage = chunks[-2], chunks[-1]
    assert final["choices"][0]["delta"] == {} and final["choices"][0]["finish_reason"] == "tool_calls"
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == tokens.prompt_tokens(TURN1, TOOLS)
    assert all(c["usage"] is None for c in chunks[:-1])
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])


def test_text_stream_arrives_in_several_content_deltas(mock_url):
    events = _sse(mock_url, {"model": "plan", "messages": TURN2})
    deltas = [c["choices"][0]["delta"].get("content") for c in events[:-1]]
    pieces = [d for d in deltas if d]
    assert len(pieces) == tokens.count(PLAN_ANSWER)
    assert "".join(pieces) == PLAN_ANSWER
    assert "usage" not in events[-2]


def test_unknown_sampling_parameters_are_accepted(mock_url):
    body = _post(
        mock_url,
        {
            "model": "plan",
            "messages": TURN2,
            "temperature": 0.2,
            "top_p": 0.5,
            "seed": 42,
            "foo": {"bar": [1]},
            "presence_penalty": 1,
            "user": "me",
        },
    )
    assert body["choices"][0]["message"]["content"] == PLAN_ANSWER


def test_openai_client_honours_max_tokens(mock_url):
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        completion = client.chat.completions.create(model="plan", messages=TURN2, max_completion_tokens=5)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 5


def test_rate_paces_the_stream(mock_url):
    started = time.monotonic()
    events = _sse(mock_url, {"model": "plan+rate=200", "messages": TURN2})
    elapsed = time.monotonic() - started
    # A lower bound only: 17 content tokens at 200 tokens/s cannot arrive in under ~85 ms.
    assert elapsed >= 0.08
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in events[:-1]) == PLAN_ANSWER


def test_every_cut_of_a_unicode_reply_streams_the_same_as_it_returns(mock_url):
    result = "Zażółć gęślą jaźń 🤖🧪 日本語"
    messages = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "scan_archive", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]  # fmt: skip
    full = f"The archive scan says: {result}"
    for limit in range(1, tokens.count(full) + 2):
        request = {"model": "slow", "messages": messages, "max_tokens": limit}
        plain = _post(mock_url, request)
        content, _, finish, usage = _reassemble(
            _sse(mock_url, {**request, "stream_options": {"include_usage": True}})
        )
        assert (content, finish, usage) == (
            plain["choices"][0]["message"]["content"],
            plain["choices"][0]["finish_reason"],
            plain["usage"],
        )
        assert plain["usage"]["completion_tokens"] == min(limit, tokens.count(full))
        assert finish == ("length" if limit < tokens.count(full) else "stop")
