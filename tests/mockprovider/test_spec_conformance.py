"""Every body and event the OpenAI-shaped routes send validates against OpenAI's OpenAPI spec
(the committed subset in spec/, read by `spec_support`)."""

from __future__ import annotations

import json

import pytest
from spec_support import errors

from mockprovider.scenarios import ANSWER_PLAN

QUESTION = "What does errors.log say?"
TURNS = {  # plan's three turns: a call, a call with arguments, the answer
    "call": [{"role": "user", "content": QUESTION}],
    "answer": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "Listing."},
               {"role": "assistant", "content": "Reading."}],
}


def _events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("limit", [None, 16])
def test_chat_bodies_and_chunks_follow_the_spec(in_process, turn, limit):
    body = {"model": "plan", "messages": TURNS[turn], "max_tokens": limit}
    plain = in_process.post("/v1/chat/completions", json=body)
    streamed = in_process.post("/v1/chat/completions", json={
        **body, "stream": True, "stream_options": {"include_usage": True}})
    assert errors(plain.json(), "CreateChatCompletionResponse") == []
    chunks = _events(streamed.text)
    assert len(chunks) > 2
    assert [e for c in chunks for e in errors(c, "CreateChatCompletionStreamResponse")] == []


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("limit", [None, 16])
def test_responses_bodies_and_events_follow_the_spec(in_process, turn, limit):
    body = {"model": "plan", "input": TURNS[turn], "max_output_tokens": limit}
    plain = in_process.post("/v1/responses", json=body).json()
    events = _events(in_process.post("/v1/responses", json={**body, "stream": True}).text)
    assert errors(plain, "Response") == []
    assert "user" not in plain
    assert [e for event in events for e in errors(event, "ResponseStreamEvent")] == []
    assert [e["type"] for e in events if "usage" in e.get("response", {})] == [events[-1]["type"]]


def test_a_response_with_user_null_would_fail_the_check(in_process):
    """The check itself catches the departures the routes used to have."""
    plain = in_process.post("/v1/responses", json={"model": "plan", "input": QUESTION}).json()
    assert errors({**plain, "user": None}, "Response")
    assert errors({**plain, "usage": None}, "Response")


@pytest.mark.parametrize(("limit", "status"), [(15, 400), (16, 200)])
def test_max_output_tokens_below_the_spec_minimum_is_refused_as_openai_refuses_it(in_process, limit, status):
    response = in_process.post("/v1/responses", json={
        "model": "plan", "input": TURNS["answer"], "max_output_tokens": limit})
    assert response.status_code == status
    if status == 400:
        error = response.json()["error"]
        assert (error["code"], error["param"]) == ("integer_below_min_value", "max_output_tokens")
        assert "16" in error["message"] and "15" in error["message"]
    else:
        assert response.json()["output"][0]["content"][0]["text"] != ANSWER_PLAN  # cut
