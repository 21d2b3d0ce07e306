"""aimock fixture files, as aimock's own documentation writes them, served by `--scenarios`.

The JSON below is copied from aimock's repository (CopilotKit/aimock: `fixtures/*.json` and the
examples on its Fixtures and Multi-Turn pages); each either answers as aimock documents it or is
refused at start-up with the file, the fixture and the field that has no equivalent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import o200k
from mockprovider.app import create_app
from mockprovider.scripts.files import ScenarioFileError, load_scenarios
from mockprovider.server import serve_in_thread

GREETING = {"fixtures": [
    {"match": {"userMessage": "hello"}, "response": {"content": "Hello! How can I help you today?"}},
    {"match": {"userMessage": "goodbye"}, "response": {"content": "Goodbye! Have a great day!"}},
]}
TOOL_ROUND = {"fixtures": [  # docs/multi-turn: "The tool-round idiom"
    {"match": {"toolCallId": "call_background"},
     "response": {"content": "Done! I've changed the background."}},
    {"match": {"userMessage": "change background to blue"}, "response": {"toolCalls": [
        {"id": "call_background", "name": "change_background", "arguments": {"background": "blue"}}]}},
]}
TURN_INDEX = {"fixtures": [  # docs/multi-turn: fixtures/hitl-turnindex.json
    {"match": {"userMessage": "plan a trip", "turnIndex": 0},
     "response": {"toolCalls": [{"id": "call_001", "name": "generate_steps", "arguments": "{}"}]}},
    {"match": {"userMessage": "plan a trip", "turnIndex": 1},
     "response": {"content": "Great choices! Your trip is booked."}},
]}
HAS_TOOL_RESULT = {"fixtures": [  # docs/multi-turn: fixtures/hitl-hastoolresult.json
    {"match": {"userMessage": "plan a trip", "hasToolResult": False},
     "response": {"toolCalls": [{"id": "call_001", "name": "generate_steps", "arguments": "{}"}]}},
    {"match": {"userMessage": "plan a trip", "hasToolResult": True},
     "response": {"content": "Great choices! Your trip is booked."}},
]}
TOOL_CALL = {"fixtures": [{"match": {"toolName": "get_weather"}, "response": {"toolCalls": [
    {"name": "get_weather", "arguments": {"location": "San Francisco", "unit": "fahrenheit"}}]}}]}
ERROR = {"fixtures": [{"match": {"userMessage": "rate me"}, "response": {  # llm/error-injection.json's shape
    "error": {"message": "Rate limit exceeded. Please retry after 30 seconds.", "type": "rate_limit_error",
              "code": "rate_limit_exceeded"}, "status": 429}}]}
CONTEXT = {"fixtures": [
    {"match": {"toolResultContains": "cancel"}, "response": {"content": "Cancelled, as you asked."}},
    {"match": {"systemMessage": ["travel", "agent"], "hasToolResult": True},
     "response": {"content": "Booked."}},
    {"match": {"systemMessage": "travel"}, "response": {"toolCalls": [{"name": "book", "id": "b1"}]}},
]}
THOUGHT = "The user asks why the job failed; the log names a timeout."
REASONING = {"fixtures": [{"match": {"userMessage": "why"},
                           "response": {"content": "It timed out.", "reasoning": THOUGHT}}]}
FILES = {"context": CONTEXT, "greeting": GREETING, "tool-round": TOOL_ROUND, "turn-index": TURN_INDEX,
         "has-tool-result": HAS_TOOL_RESULT, "tool-call": TOOL_CALL, "error-injection": ERROR,
         "reasoning": REASONING}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("aimock")
    for name, fixtures in FILES.items():
        (folder / f"{name}.json").write_text(json.dumps(fixtures, indent=2))
    return folder


@pytest.fixture(scope="module")
def clients(folder: Path) -> Iterator[tuple[openai.OpenAI, anthropic.Anthropic]]:
    with (serve_in_thread(create_app(scenario_files=[folder])) as base,
          openai.OpenAI(base_url=base, api_key="t", max_retries=0) as chat,
          anthropic.Anthropic(base_url=base.removesuffix("/v1"), api_key="t", max_retries=0) as claude):
        yield chat, claude


OFFERED = [{"type": "function", "function": {"name": "any_tool", "parameters": {"type": "object"}}}]
"""A tool offered by default: without any, a real model (and the mock) answers in text."""


def _ask(chat: openai.OpenAI, model: str, *messages: dict, **extra) -> Any:
    extra.setdefault("tools", OFFERED)
    return chat.chat.completions.create(model=model, messages=list(messages), **extra).choices[0].message


def test_each_file_is_a_model_named_after_it(clients):
    chat, _ = clients
    listed = {m.id: getattr(m, "description", "") for m in chat.models.list()}
    assert listed["greeting"] == "aimock fixtures from greeting.json."
    assert set(FILES) <= set(listed)


def test_user_message_matches_the_last_user_message_by_substring(clients):
    chat, _ = clients
    assert _ask(chat, "greeting", {"role": "user", "content": "well, hello"}).content == (
        "Hello! How can I help you today?")
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi"},
               {"role": "user", "content": "goodbye then"}]
    assert _ask(chat, "greeting", *history).content == "Goodbye! Have a great day!"
    with pytest.raises(openai.BadRequestError, match="no_alternative|No alternative"):
        _ask(chat, "greeting", {"role": "user", "content": "nothing matches"})


def test_the_tool_round_idiom_answers_through_chat_and_messages(clients):
    chat, claude = clients
    ask = {"role": "user", "content": "change background to blue"}
    call = _ask(chat, "tool-round", ask).tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_background", "change_background", {"background": "blue"})
    asked = {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]}
    result = {"role": "tool", "tool_call_id": "call_background", "content": "ok"}
    done = _ask(chat, "tool-round", ask, asked, result)
    assert done.content == "Done! I've changed the background."
    offered = [{"name": "change_background", "input_schema": {"type": "object"}}]
    first = claude.messages.create(model="tool-round", max_tokens=100, messages=[ask], tools=offered)
    assert first.content[0].id == "call_background"
    second = claude.messages.create(model="tool-round", max_tokens=100, messages=[
        ask, {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_background",
                                      "content": "ok"}]}], tools=offered)
    assert second.content[0].text == "Done! I've changed the background."


@pytest.mark.parametrize("model", ["turn-index", "has-tool-result"])
def test_turn_index_and_has_tool_result_tell_the_two_legs_apart(clients, model: str):
    chat, _ = clients
    ask = {"role": "user", "content": "plan a trip"}
    call = _ask(chat, model, ask).tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("call_001", "generate_steps", "{}")
    answer = _ask(chat, model, ask, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                  {"role": "tool", "tool_call_id": "call_001", "content": "steps"})
    assert answer.content == "Great choices! Your trip is booked."


def test_system_message_and_tool_result_contains_gate_on_context(clients):
    chat, _ = clients
    system, ask = {"role": "system", "content": "You are a travel agent."}, {"role": "user", "content": "Go"}
    call = _ask(chat, "context", system, ask).tool_calls[0]
    asked = {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]}
    for result, answer in (("approve", "Booked."), ("cancel", "Cancelled, as you asked.")):
        tool = {"role": "tool", "tool_call_id": "b1", "content": result}
        done = _ask(chat, "context", system, ask, asked, tool)
        assert done.content == answer
    with pytest.raises(openai.BadRequestError):  # no system message: nothing matches
        _ask(chat, "context", ask)


def test_tool_name_matches_the_tools_the_request_offers(clients):
    chat, _ = clients
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    call = _ask(chat, "tool-call", {"role": "user", "content": "weather?"}, tools=tools).tool_calls[0]
    assert json.loads(call.function.arguments) == {"location": "San Francisco", "unit": "fahrenheit"}
    with pytest.raises(openai.BadRequestError):  # other tools offered: the fixture does not match
        _ask(chat, "tool-call", {"role": "user", "content": "weather?"})


def test_an_error_response_keeps_its_status_type_and_code(clients):
    chat, claude = clients
    with pytest.raises(openai.RateLimitError) as caught:
        _ask(chat, "error-injection", {"role": "user", "content": "rate me"})
    assert caught.value.body == {"message": "Rate limit exceeded. Please retry after 30 seconds.",
                                 "type": "rate_limit_error", "param": None, "code": "rate_limit_exceeded"}
    with pytest.raises(anthropic.RateLimitError) as messages:
        claude.messages.create(model="error-injection", max_tokens=5,
                               messages=[{"role": "user", "content": "rate me"}])
    assert messages.value.body["error"]["type"] == "rate_limit_error"


def test_reasoning_is_served_as_each_api_shows_it(clients):
    chat, claude = clients
    question = {"role": "user", "content": "why"}
    usage = chat.chat.completions.create(model="reasoning", messages=[question], tools=OFFERED).usage
    assert usage.completion_tokens_details.reasoning_tokens == o200k.count(THOUGHT)
    message = claude.messages.create(model="reasoning", max_tokens=200, messages=[question])
    assert [(b.type, getattr(b, "thinking", None)) for b in message.content] == [
        ("thinking", THOUGHT), ("text", None)]


def test_usage_and_pacing_are_converted(tmp_path: Path):
    path = tmp_path / "paced.json"
    path.write_text(json.dumps({"fixtures": [{
        "match": {"systemMessage": ["terse", "bot"]},
        "response": {"content": "Hi.", "usage": {"input_tokens": 40, "output_tokens": 9},
                     "finishReason": "stop"},
        "latency": 20, "streamingProfile": {"ttft": 150, "tps": 40}}]}))
    scenario = load_scenarios([path])["paced"]
    reply = scenario.turns[0][0].answer
    assert (reply.latency_ms, reply.rate_tps, reply.usage.prompt_tokens, reply.usage.completion_tokens) == (
        150, 40, 40, 9)
    assert scenario.options == "usage=recorded"  # aimock serves a fixture's usage as written


# (document, JSON path of the refused field, words of the reason)
REFUSED = [
    ({"fixtures": [{"match": {"userMessage": "tell me a joke", "sequenceIndex": 0},  # sequential-responses
                    "response": {"content": "Why did the programmer quit his job?"}}]},
     "$.fixtures[0].match.sequenceIndex", "keeps no state between requests"),
    ({"fixtures": [{"match": {"userMessage": "hello", "model": "gpt-4"}, "response": {"content": "Hello!"},
                    "latency": 200, "chunkSize": 10}]},  # the Fixtures page's first example
     "$.fixtures[0].chunkSize", "count tokens, not characters"),
    ({"fixtures": [{"match": {"userMessage": "hello", "model": "gpt-4"}, "response": {"content": "Hello!"}}]},
     "$.fixtures[0].match.model", "the model name selects the scenario"),
    ({"fixtures": [{"match": {"userMessage": "explain gravity"}, "response": {"content": "Gravity is..."},
                    "streamingProfile": {"ttft": 200, "tps": 40, "jitter": 0.1}}]},  # streaming-physics
     "$.fixtures[0].streamingProfile.jitter", "never random"),
    ({"fixtures": [{"match": {"userMessage": "what's the weather in NYC?"}, "response": {"blocks": [
        {"type": "toolCall", "name": "get_weather", "arguments": "{\"city\": \"NYC\"}"},
        {"type": "text", "text": "Let me check the weather in NYC for you."}]}}]},  # blocks-tool-first
     "$.fixtures[0].response.blocks[1]", "sends its text before its tool calls"),
    ({"fixtures": [{"match": {}, "response": {"content": "x"}}, {"match": {}, "response": {"content": "y"},
                                                                 "chaos": {"dropRate": 0.5}}]},
     "$.fixtures[1].chaos", "never random"),
    ({"fixtures": [{"match": {}, "response": {"content": "x", "finishReason": "length"}}]},
     "$.fixtures[0].response.finishReason", "finishes with 'stop'"),
    ({"fixtures": [{"match": {}, "response": {"content": "x", "status": 201}}]},
     "$.fixtures[0].response.status", "belongs to an error response"),
    ({"fixtures": [{"match": {"endpoint": "embedding"}, "response": {"embedding": [0.1]}}]},
     "$.fixtures[0].response.embedding", "unknown key"),
    # A value our own format refuses is named where it sits in the aimock file (it was named at
    # "$.turns[0][0]...", a path the file does not have).
    ({"fixtures": [{"match": {}, "response": {"content": "x"}}, {"match": {}, "response": {"content": "y"},
                                                                 "latency": 2000}]},
     "$.fixtures[1].latency", "expected a number from 0 to 1000"),
    ({"fixtures": [{"match": {}, "response": {"error": {"message": "m"}, "status": 200}}]},
     "$.fixtures[0].response", "error.status: expected a number from 400 to 599, got 200"),
    ({"fixtures": [{"match": {}, "response": {"error": {"message": "m", "code": None}, "status": 429}}]},
     "$.fixtures[0].response", "error.code: expected a string, got null"),
    ({"fixtures": [{"match": {}, "response": {"toolCalls": [{"name": "f", "arguments": 5}]}}]},
     "$.fixtures[0].response", "tool_calls[0].arguments: expected an object or a JSON string"),
    ({"fixtures": [{"match": {}, "response": {"content": "x",
                                              "usage": {"input_tokens": -1, "output_tokens": 2}}}]},
     "$.fixtures[0].response", "usage.prompt_tokens: expected a number from 0"),
]


@pytest.mark.parametrize(("document", "where", "why"), REFUSED)
def test_what_has_no_equivalent_is_refused_naming_the_file_fixture_and_field(
        tmp_path: Path, document: dict, where: str, why: str):
    path = tmp_path / "fixtures.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios([path])
    assert str(caught.value).startswith(f"{path}: {where}: ")
    assert why in str(caught.value)


def test_python_m_mockprovider_refuses_an_unconvertible_fixture_file_in_one_line(tmp_path: Path):
    path = tmp_path / "jokes.json"
    path.write_text(json.dumps(REFUSED[0][0]))
    command = [sys.executable, "-m", "mockprovider", "--port", "0", "--scenarios", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"mockprovider: {path}: $.fixtures[0].match.sequenceIndex: aimock's")
    assert done.stderr.count("\n") == 1
