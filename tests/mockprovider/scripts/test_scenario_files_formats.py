"""One scenario file, three wire formats: the same script, turn by turn, through each official client.

A file with tools outside our catalogue and a condition is driven through /v1/chat/completions
(openai), /v1/responses (openai) and /v1/messages (anthropic), created and streamed, down both
branches of its condition; every format must answer the same calls, texts and token counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from mockprovider.server import serve_in_thread

SYSTEM = "You help travellers."
TASK = "Do I need an umbrella in Zürich today?"
SCENARIO = {
    "name": "umbrella",
    "description": "Checks the weather; if it rains, finds an umbrella shop and the time.",
    "turns": [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}}]},
        [
            {"if": {"tool_result_contains": "rain"}, "tool_calls": [
                {"name": "find_shop", "arguments": {"sells": "umbrellas", "near": "Zürich HB"}},
                {"name": "get_time", "id": "time-1", "arguments": "{}"},
            ]},
            {"content": "No umbrella needed: it is sunny."},
        ],
        {"content": "Take an umbrella: the shop near Zürich HB is open."},
    ],
}
SCHEMAS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "find_shop": {"type": "object", "properties": {"sells": {"type": "string"}, "near": {"type": "string"}}},
    "get_time": {"type": "object", "properties": {}},
}
RESULTS = {"find_shop": "Umbrellas at Bahnhofstrasse 1, open until 20:00", "get_time": "14:05"}


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One reply as any format can state it."""

    calls: tuple[tuple[str, str, Any], ...]
    """(id, name, parsed arguments)."""
    text: str | None
    input_tokens: int
    output_tokens: int


def _result(name: str, weather: str) -> str:
    return weather if name == "get_weather" else RESULTS[name]


Driver = Callable[[str, bool, str], list[Turn]]


def _chat(url: str, stream: bool, weather: str) -> list[Turn]:
    tools = [{"type": "function", "function": {"name": n, "description": f"{n} tool", "parameters": s}}
             for n, s in SCHEMAS.items()]
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    turns = []
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        for _ in range(3):
            kwargs = {"model": "umbrella", "messages": messages, "tools": tools}
            if stream:
                with client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as s:
                    reply = s.get_final_completion()
            else:
                reply = client.chat.completions.create(**kwargs)
            message = reply.choices[0].message
            calls = tuple(
                (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or ()
            )
            turns.append(Turn(calls=calls, text=message.content, input_tokens=reply.usage.prompt_tokens,
                              output_tokens=reply.usage.completion_tokens))
            if not calls:
                return turns
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                              "arguments": c.function.arguments}}
                for c in message.tool_calls]})
            messages += [
                {"role": "tool", "tool_call_id": i, "content": _result(n, weather)} for i, n, _ in calls
            ]
    return turns


def _responses(url: str, stream: bool, weather: str) -> list[Turn]:
    tools = [{"type": "function", "name": n, "description": f"{n} tool", "parameters": s}
             for n, s in SCHEMAS.items()]
    items: list[Any] = [{"role": "user", "content": TASK}]
    turns = []
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        for _ in range(3):
            kwargs = {"model": "umbrella", "instructions": SYSTEM, "input": items, "tools": tools}
            if stream:
                with client.responses.stream(**kwargs) as s:
                    reply = s.get_final_response()
            else:
                reply = client.responses.create(**kwargs)
            calls = tuple((o.call_id, o.name, json.loads(o.arguments)) for o in reply.output
                          if o.type == "function_call")
            text = reply.output_text if not calls else None
            turns.append(Turn(calls=calls, text=text, input_tokens=reply.usage.input_tokens,
                              output_tokens=reply.usage.output_tokens))
            if not calls:
                return turns
            items += reply.output  # as the openai docs feed a response back
            items += [{"type": "function_call_output", "call_id": i, "output": _result(n, weather)}
                      for i, n, _ in calls]
    return turns


def _messages(url: str, stream: bool, weather: str) -> list[Turn]:
    tools = [{"name": n, "description": f"{n} tool", "input_schema": s} for n, s in SCHEMAS.items()]
    messages: list[dict] = [{"role": "user", "content": TASK}]
    turns = []
    with anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=0) as client:
        for _ in range(3):
            kwargs = {"model": "umbrella", "system": SYSTEM, "max_tokens": 1024, "messages": messages,
                      "tools": tools}
            if stream:
                with client.messages.stream(**kwargs) as s:
                    reply = s.get_final_message()
            else:
                reply = client.messages.create(**kwargs)
            calls = tuple((b.id, b.name, b.input) for b in reply.content if b.type == "tool_use")
            text = "".join(b.text for b in reply.content if b.type == "text") if not calls else None
            turns.append(Turn(calls=calls, text=text, input_tokens=reply.usage.input_tokens,
                              output_tokens=reply.usage.output_tokens))
            if not calls:
                return turns
            messages.append({"role": "assistant", "content": reply.content})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": i, "content": _result(n, weather)}
                for i, n, _ in calls
            ]})
    return turns


@pytest.fixture(scope="module")
def umbrella_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path: Path = tmp_path_factory.mktemp("scenarios") / "umbrella.json"
    path.write_text(json.dumps(SCENARIO, ensure_ascii=False), encoding="utf-8")
    with serve_in_thread(scenario_files=[path]) as url:
        yield url


@pytest.mark.parametrize("weather", ["light rain, 9 C", "sunny, 24 C"], ids=["rain", "sun"])
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("drive", [_responses, _messages], ids=["responses", "messages"])
def test_a_scenario_file_answers_every_format_as_the_chat_route_turn_by_turn(
    umbrella_url: str, drive: Driver, stream: bool, weather: str
):
    expected = _chat(umbrella_url, False, weather)
    assert _chat(umbrella_url, True, weather) == expected
    assert drive(umbrella_url, stream, weather) == expected


def test_both_branches_are_what_the_file_scripts(umbrella_url: str):
    rain = _chat(umbrella_url, False, "light rain, 9 C")
    sun = _chat(umbrella_url, False, "sunny, 24 C")
    assert [t.calls for t in rain] == [
        (("call_0_0", "get_weather", {"city": "Zürich"}),),
        (("call_1_0", "find_shop", {"sells": "umbrellas", "near": "Zürich HB"}), ("time-1", "get_time", {})),
        (),
    ]
    assert rain[-1].text == "Take an umbrella: the shop near Zürich HB is open."
    assert [t.calls for t in sun][1:] == [()] and sun[-1].text == "No umbrella needed: it is sunny."
    # Each turn's input grows: the formula counts the calls and results fed back.
    assert rain[0].input_tokens < rain[1].input_tokens < rain[2].input_tokens


@pytest.mark.parametrize(("limit", "calls_kept"), [(16, 0), (29, 1)])  # 29: the call, its arguments cut
def test_a_max_tokens_cut_bills_and_shows_the_same_in_every_format(
    umbrella_url: str, limit: int, calls_kept: int
):
    asked = [{"role": "user", "content": TASK}]
    chat_tools = [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in SCHEMAS.items()]
    with openai.OpenAI(base_url=umbrella_url, api_key="unused", max_retries=0) as client:
        chat = client.chat.completions.create(
            model="umbrella", messages=asked, max_tokens=limit, tools=chat_tools
        )
        response = client.responses.create(
            model="umbrella", input=TASK, max_output_tokens=limit,
            tools=[{"type": "function", "name": n, "parameters": s} for n, s in SCHEMAS.items()],
        )
    with anthropic.Anthropic(base_url=umbrella_url.removesuffix("/v1"), api_key="unused", max_retries=0) as a:
        message = a.messages.create(model="umbrella", max_tokens=limit, messages=asked,
                                    tools=[{"name": n, "input_schema": s} for n, s in SCHEMAS.items()])
    chat_calls = [(c.id, c.function.arguments) for c in chat.choices[0].message.tool_calls or ()]
    assert len(chat_calls) == calls_kept
    assert chat.choices[0].finish_reason == "length"
    assert (response.status, response.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert message.stop_reason == "max_tokens"
    billed = (chat.usage.completion_tokens, response.usage.output_tokens, message.usage.output_tokens)
    assert billed == (limit, limit, limit)
    assert [(o.call_id, o.arguments) for o in response.output if o.type == "function_call"] == chat_calls
    assert [b.id for b in message.content if b.type == "tool_use"] == [i for i, _ in chat_calls]
