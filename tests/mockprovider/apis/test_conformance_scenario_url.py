"""The scenario chosen by the base URL (`/o/scenario=NAME/v1`) or the `x-mock-options` header,
whatever `model` says, so a client that checks model names can send a real one; the reply
echoes the model the client sent, as a real API does."""

from __future__ import annotations

import anthropic
import openai
import pytest

from mockprovider.scripts.scenarios import ANSWER_FOLDER

QUESTION = {"role": "user", "content": "Which file mentions a timeout?"}
TOOLS = [{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}}]


def _with_options(mock_url: str, options: str) -> str:
    return mock_url.replace("/v1", f"/o/{options}/v1")


def test_chat_picks_the_scenario_from_the_url_and_echoes_the_real_model_name(mock_url):
    with openai.OpenAI(base_url=_with_options(mock_url, "scenario=once"), api_key="x") as client:
        first = client.chat.completions.create(model="gpt-4o", messages=[QUESTION], tools=TOOLS)
        assert first.model == "gpt-4o"
        assert first.choices[0].message.tool_calls[0].function.name == "list_files"
        call = first.choices[0].message.tool_calls[0]
        answered = [
            QUESTION,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "errors.log"},
        ]
        second = client.chat.completions.create(model="gpt-4o", messages=answered, tools=TOOLS)
    assert second.choices[0].message.content == ANSWER_FOLDER


def test_the_header_picks_the_scenario_too(mock_url):
    with openai.OpenAI(
        base_url=mock_url, api_key="x", default_headers={"x-mock-options": "scenario=once"}
    ) as client:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[QUESTION], tools=TOOLS)
    assert reply.model == "gpt-4o-mini"
    assert reply.choices[0].message.tool_calls[0].function.name == "list_files"


def test_url_options_combine_with_the_scenario(mock_url):
    with openai.OpenAI(base_url=_with_options(mock_url, "latency=1+scenario=plan"), api_key="x") as client:
        reply = client.chat.completions.create(model="o3", messages=[QUESTION], tools=TOOLS)
    assert reply.model == "o3"


def test_responses_and_messages_pick_it_from_the_url(mock_url):
    url = _with_options(mock_url, "scenario=plan")
    with openai.OpenAI(base_url=url, api_key="x") as client:
        response = client.responses.create(
            model="gpt-4.1",
            input="Which file?",
            tools=[{"type": "function", "name": "list_files", "parameters": {"type": "object"}}],
        )
    assert response.model == "gpt-4.1"
    assert response.output[0].name == "list_files"
    with anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="x") as client:
        message = client.messages.create(
            model="claude-sonnet-4",
            max_tokens=100,
            messages=[QUESTION],
            tools=[{"name": "list_files", "input_schema": {"type": "object"}}],
        )
    assert message.model == "claude-sonnet-4"
    assert message.content[0].name == "list_files"


def test_an_unknown_scenario_in_the_url_is_model_not_found_listing_the_known_ones(mock_url):
    with openai.OpenAI(
        base_url=_with_options(mock_url, "scenario=plann"), api_key="x", max_retries=0
    ) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model="gpt-4o", messages=[QUESTION])
    assert caught.value.body["code"] == "model_not_found"
    assert "'plann'" in caught.value.body["message"] and "runaway" in caught.value.body["message"]


def test_without_a_scenario_option_the_model_name_still_chooses(mock_url):
    with openai.OpenAI(base_url=_with_options(mock_url, "latency=1"), api_key="x", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="gpt-4o", messages=[QUESTION])
        assert client.chat.completions.create(model="plan", messages=[QUESTION], tools=TOOLS).model == "plan"
