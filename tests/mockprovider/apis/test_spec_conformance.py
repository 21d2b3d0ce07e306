"""Every body and event the OpenAI-shaped routes send (Azure OpenAI's and the embeddings included)
validates against OpenAI's OpenAPI spec (the committed subset in spec/, read by `spec_support`)."""

from __future__ import annotations

import json

import pytest
from spec_support import errors

from mockprovider.scripts.scenarios import ANSWER_PLAN

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


@pytest.mark.parametrize("limit", [0, -3])
def test_max_output_tokens_of_zero_or_less_is_below_the_minimum_too(in_process, limit):
    response = in_process.post("/v1/responses", json={
        "model": "plan", "input": TURNS["answer"], "max_output_tokens": limit})
    error = response.json()["error"]
    assert (response.status_code, error["code"], error["param"]) == (
        400, "integer_below_min_value", "max_output_tokens")
    assert f"got {limit} instead" in error["message"]


# --- Azure OpenAI's routes and the embeddings: the same spec -----------------------------------

VERSIONED = "?api-version=2024-10-21"
AZURE_CHAT = [f"/openai/deployments/plan/chat/completions{VERSIONED}", "/openai/v1/chat/completions"]
AZURE_RESPONSES = [f"/openai/deployments/plan/responses{VERSIONED}", "/openai/v1/responses"]
EMBEDDINGS = ["/v1/embeddings", f"/openai/deployments/plan/embeddings{VERSIONED}", "/openai/v1/embeddings"]


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("path", AZURE_CHAT)
def test_azure_chat_bodies_and_chunks_follow_the_spec(in_process, turn, path):
    body = {"model": "plan", "messages": TURNS[turn]}
    plain = in_process.post(path, json=body)
    streamed = in_process.post(path, json={**body, "stream": True, "stream_options": {"include_usage": True}})
    assert plain.headers["apim-request-id"]
    assert errors(plain.json(), "CreateChatCompletionResponse") == []
    chunks = _events(streamed.text)
    assert len(chunks) > 2
    assert [e for c in chunks for e in errors(c, "CreateChatCompletionStreamResponse")] == []


@pytest.mark.parametrize("path", [f"/openai/deployments/plan+content_filter=on/chat/completions{VERSIONED}",
                                  "/openai/v1/chat/completions"])
def test_azure_content_filter_results_keep_the_bodies_in_the_spec(in_process, path):
    """Azure's filter fields are extra fields the spec allows; only the stream's first chunk, which
    carries the prompt's results and no choice, is Azure's own (its `object` is empty)."""
    body = {"model": "plan+content_filter=on", "messages": TURNS["answer"]}
    plain = in_process.post(path, json=body).json()
    chunks = _events(in_process.post(path, json={**body, "stream": True}).text)
    assert plain["prompt_filter_results"] and errors(plain, "CreateChatCompletionResponse") == []
    assert chunks[0]["choices"] == [] and chunks[0]["object"] == ""
    assert [e for c in chunks[1:] for e in errors(c, "CreateChatCompletionStreamResponse")] == []


@pytest.mark.parametrize("turn", TURNS)
@pytest.mark.parametrize("path", AZURE_RESPONSES)
def test_azure_responses_bodies_and_events_follow_the_spec(in_process, turn, path):
    body = {"model": "plan", "input": TURNS[turn]}
    plain = in_process.post(path, json=body).json()
    events = _events(in_process.post(path, json={**body, "stream": True}).text)
    assert errors(plain, "Response") == []
    assert [e for event in events for e in errors(event, "ResponseStreamEvent")] == []


@pytest.mark.parametrize("path", EMBEDDINGS)
@pytest.mark.parametrize("given", ["one text", ["two", "texts"], [[1, 2, 3]]])
def test_embedding_bodies_follow_the_spec(in_process, path, given):
    """The spec describes the float vectors; base64 is a string in the same place."""
    plain = in_process.post(path, json={"model": "plan", "input": given, "dimensions": 32}).json()
    assert errors(plain, "CreateEmbeddingResponse") == []
    encoded = in_process.post(path, json={"model": "plan", "input": given, "encoding_format": "base64"})
    encoded = encoded.json()
    assert errors({**encoded, "data": []}, "CreateEmbeddingResponse") == []
    assert all(isinstance(item["embedding"], str) for item in encoded["data"])


def test_a_vector_of_strings_would_fail_the_embedding_check(in_process):
    plain = in_process.post("/v1/embeddings", json={"model": "plan", "input": "x", "dimensions": 4}).json()
    broken = {**plain, "data": [{**plain["data"][0], "embedding": ["0.5"] * 4}]}
    assert errors(broken, "CreateEmbeddingResponse")


# --- Messages: the anthropic SDK's own types, strictly ----------------------------------------

LONG = " ".join(f"Rule {i}: check the log before answering." for i in range(160))


def _extras(value: object, path: str = "$") -> list[str]:
    """Fields the SDK's types do not declare (its models keep them as extras)."""
    import pydantic

    if isinstance(value, pydantic.BaseModel):
        found = [f"{path}.{k}" for k in value.model_extra or {}]
        fields = type(value).model_fields
        return found + [e for k in fields for e in _extras(getattr(value, k), f"{path}.{k}")]
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _extras(v, f"{path}[{i}]")]
    return []


def _strict(model: object, data: dict) -> None:
    """`data` validates as `model`, and declares no field the type does not know."""
    import pydantic

    assert _extras(pydantic.TypeAdapter(model).validate_python(data)) == []


@pytest.mark.parametrize("model", ["plan", "plan+fault=429", "nope"])
def test_messages_bodies_events_and_errors_are_the_sdks_types(in_process, model):
    import anthropic.types as t

    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    body = {"model": model, "max_tokens": 100, "system": system,
            "messages": [{"role": "user", "content": "Which file mentions a timeout?"}]}
    plain = in_process.post("/v1/messages", json=body)
    if plain.status_code != 200:
        _strict(t.ErrorResponse, plain.json())
        return
    _strict(t.Message, plain.json())
    assert plain.json()["usage"]["cache_creation"]["ephemeral_1h_input_tokens"] > 1024
    events = _events(in_process.post("/v1/messages", json={**body, "stream": True}).text)
    for event in events:
        _strict(t.RawMessageStreamEvent, event)
