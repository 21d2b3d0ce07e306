"""The fixtures' API, used from this suite as another project would: root and base URLs, the
per-turn journal view, `clear()`, the session-scoped mock re-set per test, `GET /journal` filters."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from mockprovider.pytest_plugin import MockLLM

WEATHER = {"name": "weather", "after_last": "repeat", "turns": [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "w1"}]},
    {"content": "Take an umbrella."},
]}
ASK = [{"role": "user", "content": "Umbrella in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
"""Offered in every request: without tools, a real model (and the mock) answers in text."""
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
MESSAGES_TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]


def _two_turns_in_every_format(mock: MockLLM) -> None:
    with (openai.OpenAI(base_url=mock.base_url, api_key="t") as chat,
          anthropic.Anthropic(base_url=mock.root_url, api_key="t") as claude):
        first = chat.chat.completions.create(model="weather", messages=ASK, tools=TOOLS).choices[0].message
        answered = {"role": "tool", "tool_call_id": "w1", "content": "rain"}
        history = [*ASK, first.model_dump(exclude_none=True), answered]
        chat.chat.completions.create(model="weather", messages=history, tools=TOOLS)
        response = chat.responses.create(model="weather", input=ASK, tools=RESPONSES_TOOLS)
        chat.responses.create(model="weather", tools=RESPONSES_TOOLS, input=[
            *ASK, *[item.model_dump(exclude_none=True) for item in response.output],
            {"type": "function_call_output", "call_id": "w1", "output": "rain"}])
        message = claude.messages.create(model="weather", max_tokens=100, messages=ASK, tools=MESSAGES_TOOLS)
        claude.messages.create(model="weather", max_tokens=100, tools=MESSAGES_TOOLS, messages=[
            *ASK, {"role": "assistant", "content": [b.model_dump() for b in message.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "w1", "content": "rain"}]}])


@pytest.mark.mock_llm(scenarios=[WEATHER])
def test_requests_filter_the_journal_by_turn_and_path_in_every_format(mock_llm: MockLLM):
    _two_turns_in_every_format(mock_llm)
    assert len(mock_llm.requests()) == 6
    paths = [e.path for e in mock_llm.requests(turn=0)]
    assert paths == ["/v1/chat/completions", "/v1/responses", "/v1/messages"]
    second = mock_llm.requests(turn=1, path="/v1/messages")
    assert len(second) == 1 and second[0].body["messages"][-1]["content"][0]["tool_use_id"] == "w1"
    assert mock_llm.bodies(turn=1, path="/v1/responses")[0]["input"][-1]["output"] == "rain"
    assert mock_llm.requests(turn=2) == []
    assert [b["model"] for b in mock_llm.bodies(path="/v1/chat/completions")] == ["weather", "weather"]


@pytest.mark.mock_llm(scenarios=[WEATHER])
def test_an_options_prefix_in_the_path_is_ignored_by_the_path_filter(mock_llm: MockLLM):
    url = f"{mock_llm.root_url}/o/latency=1/v1/chat/completions"
    httpx.post(url, json={"model": "weather", "messages": ASK})
    assert len(mock_llm.requests(path="/v1/chat/completions")) == 1


def test_clear_forgets_what_was_journalled(mock_llm: MockLLM):
    httpx.post(f"{mock_llm.base_url}/chat/completions", json={"model": "plan", "messages": ASK})
    assert len(mock_llm.requests()) == 1
    mock_llm.clear()
    assert mock_llm.requests() == [] and mock_llm.bodies() == []
    httpx.post(f"{mock_llm.base_url}/chat/completions", json={"model": "plan", "messages": ASK})
    assert mock_llm.bodies() == [{"model": "plan", "messages": ASK}]


SHARED_THEN_NEXT = """
import openai
import pytest

WEATHER = {"name": "weather", "turns": [{"tool_calls": [{"name": "get_weather", "arguments": {}}]}]}
ASK = [{"role": "user", "content": "Umbrella in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
SESSION = []


@pytest.mark.mock_llm(scenarios=[WEATHER], api_key="k2")
def test_the_shared_mock_serves_this_tests_marker_without_a_restart(mock_llm_shared, mock_llm_session):
    SESSION.append(mock_llm_shared)
    assert mock_llm_shared is mock_llm_session
    assert mock_llm_shared.requests() == []  # cleared before the test
    with openai.OpenAI(base_url=mock_llm_shared.base_url, api_key="k2") as client:
        reply = client.chat.completions.create(model="weather", messages=ASK, tools=TOOLS)
    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    with pytest.raises(openai.AuthenticationError), openai.OpenAI(
            base_url=mock_llm_shared.base_url, api_key="wrong", max_retries=0) as wrong:
        wrong.models.list()


def test_the_next_test_finds_the_session_mock_as_the_session_set_it_up(mock_llm_shared):
    assert SESSION == [mock_llm_shared]  # the same server, not restarted
    with openai.OpenAI(base_url=mock_llm_shared.base_url, api_key="any", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError):  # the previous test's file is gone
            client.chat.completions.create(model="weather", messages=ASK)
        reply = client.chat.completions.create(model="plan", messages=ASK, tools=TOOLS)
        assert reply.choices[0].message.tool_calls
    assert len(mock_llm_shared.requests()) == 2
"""


def test_the_session_mock_serves_each_tests_marker_and_is_re_set_for_the_next(pytester: pytest.Pytester):
    # Two tests of one session, in order: a nested run, so that test workers cannot split them.
    (pytester.path / "test_shared.py").write_text(SHARED_THEN_NEXT)
    done = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    done.assert_outcomes(passed=2)


def test_configure_swaps_scenarios_and_options_between_requests(mock_llm: MockLLM):
    with openai.OpenAI(base_url=mock_llm.base_url, api_key="t", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="weather", messages=ASK)
        mock_llm.configure(scenarios=[WEATHER])
        reply = client.chat.completions.create(model="weather", messages=ASK, tools=TOOLS)
        assert reply.choices[0].message.tool_calls
    assert len(mock_llm.requests()) == 2  # the journal is kept


@pytest.mark.mock_llm(scenarios=[WEATHER])
def test_get_journal_filters_by_path_and_model(mock_llm: MockLLM):
    _two_turns_in_every_format(mock_llm)
    httpx.post(f"{mock_llm.base_url}/chat/completions", json={"model": "plan+latency=1", "messages": ASK})

    def seen(**query: str) -> list[tuple[str, str]]:
        page = httpx.get(f"{mock_llm.root_url}/journal", params=query).json()
        return [(e["path"], e["body"]["model"]) for e in page["data"]]

    assert len(seen()) == 7
    assert seen(path="/v1/messages") == [("/v1/messages", "weather")] * 2
    assert seen(model="plan") == [("/v1/chat/completions", "plan+latency=1")]
    assert seen(model="plan+latency=1") == seen(model="plan")
    assert seen(path="/v1/chat/completions", model="weather") == [("/v1/chat/completions", "weather")] * 2
    assert seen(model="nothing") == []


GEMINI_PATHS = ["/v1beta/models/weather:generateContent",
                "/o/latency=1/v1beta/models/weather:streamGenerateContent"]


def _second_turns_through_gemini_and_ollama(mock: MockLLM) -> None:
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    answer = {"functionResponse": {"name": "get_weather", "response": {"result": "rain"}}}
    gemini = {"contents": [{"role": "user", "parts": [{"text": "Umbrella in Paris?"}]},
                           {"role": "model", "parts": [call]}, {"role": "user", "parts": [answer]}]}
    ollama = {"model": "weather", "stream": False, "messages": [
        *ASK, {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "rain"}]}
    with httpx.Client(base_url=mock.root_url) as http:
        for path in GEMINI_PATHS:
            assert http.post(path, json=gemini).status_code == 200
        assert http.post("/api/chat", json=ollama).status_code == 200


@pytest.mark.mock_llm(scenarios=[WEATHER])
def test_requests_count_the_turn_of_gemini_and_ollama_requests_too(mock_llm: MockLLM):
    _second_turns_through_gemini_and_ollama(mock_llm)
    assert [e.path for e in mock_llm.requests(turn=1)] == [*GEMINI_PATHS, "/api/chat"]
    assert mock_llm.requests(turn=0) == []


@pytest.mark.mock_llm(scenarios=[WEATHER])
def test_get_journal_finds_a_gemini_requests_model_in_its_path(mock_llm: MockLLM):
    # Gemini names the model in the URL, not the body.
    _second_turns_through_gemini_and_ollama(mock_llm)
    httpx.post(f"{mock_llm.root_url}/v1beta/models/plan:generateContent",
               json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    page = httpx.get(f"{mock_llm.root_url}/journal", params={"model": "weather"}).json()
    assert [e["path"] for e in page["data"]] == [*GEMINI_PATHS, "/api/chat"]
    page = httpx.get(f"{mock_llm.root_url}/journal", params={"model": "plan"}).json()
    assert [e["path"] for e in page["data"]] == ["/v1beta/models/plan:generateContent"]


def test_configure_refuses_a_journal_capacity_it_would_ignore(mock_llm: MockLLM):
    # The journal is kept across configure(); a capacity given there was silently dropped.
    with pytest.raises(pytest.fail.Exception, match="journal"):
        mock_llm.configure(journal=5)
    assert mock_llm.buffer.capacity > 5
