"""The fixtures' API, used from this suite as another project would: root and base URLs, the
per-turn journal view, `clear()`, the session-scoped mock re-set per test, `GET /journal` filters."""

from __future__ import annotations

import json

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
def test_a_messages_request_under_the_interleaved_thinking_beta_is_found_by_its_turn(mock_llm: MockLLM):
    # Its thinking budget exceeds max_tokens, which Messages takes only under that beta header.
    with anthropic.Anthropic(base_url=mock_llm.root_url, api_key="t") as claude:
        claude.messages.create(model="weather", max_tokens=2000, messages=ASK,
                               thinking={"type": "enabled", "budget_tokens": 5000},
                               extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
    assert [e.path for e in mock_llm.requests(turn=0)] == ["/v1/messages"]


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
    SESSION.append(mock_llm_shared.app)
    assert mock_llm_shared.app is mock_llm_session.app  # the session's server, seen as this test
    mine = mock_llm_shared.test_id
    assert mine and mock_llm_shared.base_url.endswith(f"/o/test={mine}/v1")
    assert mock_llm_shared.requests() == []  # this test's own journal
    with openai.OpenAI(base_url=mock_llm_shared.base_url, api_key="k2") as client:
        reply = client.chat.completions.create(model="weather", messages=ASK, tools=TOOLS)
    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    with pytest.raises(openai.AuthenticationError), openai.OpenAI(
            base_url=mock_llm_shared.base_url, api_key="wrong", max_retries=0) as wrong:
        wrong.models.list()


def test_the_next_test_finds_the_session_mock_as_the_session_set_it_up(mock_llm_shared):
    assert SESSION == [mock_llm_shared.app]  # the same server, not restarted
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


@pytest.mark.mock_llm(scenarios=[WEATHER])
def test_a_gemini_path_matches_whichever_version_prefix_the_client_used(mock_llm: MockLLM):
    # google-genai given a base URL posts to /v1/...; its default is /v1beta/...
    body = {"contents": [{"role": "user", "parts": [{"text": "Umbrella in Paris?"}]}]}
    with httpx.Client(base_url=mock_llm.root_url) as http:
        for version in ("v1", "v1beta"):
            assert http.post(f"/{version}/models/weather:generateContent", json=body).status_code == 200
    for asked in ("/v1/models/weather:generateContent", "/v1beta/models/weather:generateContent"):
        assert len(mock_llm.requests(path=asked)) == 2
        page = httpx.get(f"{mock_llm.root_url}/journal", params={"path": asked}).json()
        assert len(page["data"]) == 2
    assert mock_llm.requests(path="/v1beta/models/weather:streamGenerateContent") == []


CONFIGURE_RELATIVE = """
import json
import os

import openai

ASK = [{"role": "user", "content": "Umbrella in Paris?"}]


def test_configure_reads_a_relative_path_from_the_test_files_folder(mock_llm, tmp_path):
    os.chdir(tmp_path)  # wherever pytest runs, the path is the test file's neighbour
    mock_llm.configure(scenarios=["scenarios/weather.json"])
    with openai.OpenAI(base_url=mock_llm.base_url, api_key="t") as client:
        reply = client.chat.completions.create(model="weather", messages=ASK)
    assert reply.choices[0].message.content == "Take an umbrella."
"""


def test_configure_resolves_relative_paths_as_the_marker_does(pytester: pytest.Pytester):
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "weather.json").write_text(json.dumps(
        {"name": "weather", "turns": [{"content": "Take an umbrella."}]}))
    (pytester.path / "test_relative.py").write_text(CONFIGURE_RELATIVE)
    done = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    done.assert_outcomes(passed=1)


OTHER = {"name": "weather", "turns": [{"content": "Sunglasses."}]}


def test_tests_sharing_one_mock_at_once_each_see_their_own_set_up_journal_and_faults(mock_llm_session):
    """Two tests at once on the session's mock (as workers sharing one mock run them): each
    serves its own scenario under the same name, journals only its own requests, and meets its
    own faults by its own count."""
    first, second = mock_llm_session.for_test("w1-first"), mock_llm_session.for_test("w2-second")
    first.configure(scenarios=[WEATHER])
    second.configure(scenarios=[OTHER], api_key="second-key")
    try:
        with (openai.OpenAI(base_url=first.base_url, api_key="t", max_retries=0) as a,
              openai.OpenAI(base_url=second.base_url, api_key="second-key", max_retries=0) as b):
            got_a = a.chat.completions.create(model="weather", messages=ASK, tools=TOOLS).choices[0].message
            got_b = b.chat.completions.create(model="weather", messages=ASK).choices[0].message
        assert got_a.tool_calls[0].function.name == "get_weather" and got_b.content == "Sunglasses."
        body = {"contents": [{"role": "user", "parts": [{"text": "same request, two tests"}]}]}
        turns = ((first, "t"), (second, "second-key")) * 2
        statuses = [httpx.post(f"{mock.root_url}/v1beta/models/plan+fault=429x1:generateContent", json=body,
                               headers={"x-api-key": key}).status_code for mock, key in turns]
        assert statuses == [429, 429, 200, 200]  # each test's retry counted apart
        assert [e.test_id for e in first.journal] == ["w1-first"] * 3
        assert [e.path for e in second.requests(path="/v1/chat/completions")] == [
            "/o/test=w2-second/v1/chat/completions"]
        page = httpx.get(f"{mock_llm_session.root_url}/journal", params={"test_id": "w2-second"}).json()
        assert len(page["data"]) == 3
        first.clear()
        assert first.journal == [] and len(second.journal) == 3
    finally:
        first.forget_test()
        second.forget_test()
