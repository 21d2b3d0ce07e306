"""Scenario files: tools the package has never heard of, scripted in JSON or TOML, served like built-ins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import APIStatusError, OpenAI
from starlette.requests import Request

import o200k
from mockprovider.apis.steps import resolve
from mockprovider.app import app_from_env, create_app
from mockprovider.reading.transcript import conversation
from mockprovider.scripts import scenarios
from mockprovider.scripts.conditions import MAX_MATCH_CHARS
from mockprovider.scripts.files import compile_scenario, load_scenarios

WEATHER = {
    "name": "weather",
    "description": "Looks up the weather, then answers from what the tool said.",
    "options": "latency=50",
    "turns": [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        [
            {"if": {"tool_result_contains": "rain"}, "content": "Take an umbrella."},
            {"content": "No umbrella needed."},
        ],
    ],
    "after_last": "repeat",
}
WEATHER_TOML = '''
name = "weather"
description = "Looks up the weather, then answers from what the tool said."
options = "latency=50"
after_last = "repeat"
turns = [
  { tool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }] },
  [
    { if = { tool_result_contains = "rain" }, content = "Take an umbrella." },
    { content = "No umbrella needed." },
  ],
]
'''
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city today.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
TASK = [{"role": "user", "content": "Do I need an umbrella in Paris today?"}]


def write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    path = folder / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def weather_file(tmp_path: Path) -> Path:
    return write(tmp_path, "weather.json", WEATHER)


@pytest.fixture
def weather_url(serve_mock, weather_file: Path):
    # latency=0 in the model name keeps the file's 50 ms default out of the suite's wall time.
    with serve_mock(scenario_files=[weather_file]) as url:
        yield url


def after_tool(reply_message: Any, result: str) -> list[dict[str, Any]]:
    """The task, the assistant's tool call, and the tool's `result`."""
    call = reply_message.tool_calls[0]
    return [
        *TASK,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": result},
    ]


# --- through the official openai client -------------------------------------------------------


def test_a_file_scenario_drives_the_openai_client_through_both_branches(weather_url: str):
    client = OpenAI(base_url=weather_url, api_key="unused", max_retries=0)
    model = "weather+latency=0"
    first = client.chat.completions.create(model=model, messages=TASK, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_0_0", "get_weather", {"city": "Paris"}
    )
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.usage.prompt_tokens == o200k.prompt_tokens(TASK, TOOLS)

    rainy = after_tool(first.choices[0].message, "Light rain all afternoon, 12 °C.")
    sunny = after_tool(first.choices[0].message, "Sunny, 24 °C.")
    rain_reply = client.chat.completions.create(model=model, messages=rainy, tools=TOOLS)
    sun_reply = client.chat.completions.create(model=model, messages=sunny, tools=TOOLS)
    assert rain_reply.choices[0].message.content == "Take an umbrella."
    assert sun_reply.choices[0].message.content == "No umbrella needed."
    assert rain_reply.usage.prompt_tokens == o200k.prompt_tokens(rainy, TOOLS)


def _streamed(client: OpenAI, **kwargs: Any) -> tuple[str, list[tuple[str, str, str]], str]:
    """(text, [(id, name, arguments)], finish_reason) reassembled from a stream."""
    text, calls, finish = "", {}, ""
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for part in delta.tool_calls or []:
            slot = calls.setdefault(part.index, ["", "", ""])
            slot[0] += part.id or ""
            slot[1] += (part.function.name or "") if part.function else ""
            slot[2] += (part.function.arguments or "") if part.function else ""
        finish = chunk.choices[0].finish_reason or finish
    return text, [tuple(c) for _, c in sorted(calls.items())], finish


def test_a_file_scenario_streams_both_branches_like_the_plain_reply(weather_url: str):
    client = OpenAI(base_url=weather_url, api_key="unused", max_retries=0)
    model = "weather+latency=0"
    text, calls, finish = _streamed(client, model=model, messages=TASK, tools=TOOLS)
    assert (text, calls, finish) == ("", [("call_0_0", "get_weather", '{"city":"Paris"}')], "tool_calls")

    first = client.chat.completions.create(model=model, messages=TASK, tools=TOOLS)
    for result, answer in (("rain", "Take an umbrella."), ("dry", "No umbrella needed.")):
        messages = after_tool(first.choices[0].message, result)
        assert _streamed(client, model=model, messages=messages, tools=TOOLS) == (answer, [], "stop")


def _without_volatile(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("id", "created", "model")}


PLAN_AS_A_FILE = {
    "name": "plan_file",
    "turns": [
        {"tool_calls": [{"id": "c1", "name": "list_files"}]},
        {"tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "errors.log"}}]},
        {"content": scenarios.ANSWER_PLAN},
    ],
}


@pytest.mark.parametrize("max_tokens", [None, 3])
def test_a_file_that_scripts_plan_answers_exactly_as_the_built_in_plan(serve_mock, max_tokens: int | None):
    """Counts, cuts and finish reasons come from the same Reply values, so they cannot differ."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Which file mentions a timeout?"}]
    extra = {} if max_tokens is None else {"max_tokens": max_tokens}
    with serve_mock(scenario_files=[PLAN_AS_A_FILE]) as url, httpx.Client(base_url=url) as http:
        for turn in range(3):
            ours, theirs = (
                http.post("/chat/completions", json={"model": model, "messages": messages, **extra}).json()
                for model in ("plan_file", "plan")
            )
            assert _without_volatile(ours) == _without_volatile(theirs), f"turn {turn}"
            streamed = [
                http.post("/chat/completions", json={
                    "model": model, "messages": messages, "stream": True,
                    "stream_options": {"include_usage": True}, **extra,
                }).text.replace(model, "MODEL")
                for model in ("plan_file", "plan")
            ]
            strip = [[json.loads(line[6:]) | {"id": 0, "created": 0} for line in s.split("\n\n")
                      if line.startswith("data: {")] for s in streamed]
            assert strip[0] == strip[1], f"turn {turn} streamed"
            message = theirs["choices"][0]["message"]
            messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
            for call in message.get("tool_calls", []):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})


def test_a_file_scenario_fault_option_applies_and_the_request_still_overrides(serve_mock):
    script = {"name": "flaky", "options": "fault=500@1+retry=2000", "turns": [
        {"tool_calls": [{"name": "search_tickets", "arguments": {"q": "login"}}]},
        {"content": "Ticket 42 is about the login page."},
    ]}
    with serve_mock(scenario_files=[script]) as url, httpx.Client(base_url=url) as http:
        first = http.post("/chat/completions", json={"model": "flaky", "messages": TASK, "tools": TOOLS})
        assert first.status_code == 200
        later = [*TASK, first.json()["choices"][0]["message"],
                 {"role": "tool", "tool_call_id": "call_0_0", "content": "42: login page"}]
        later[1] = {k: v for k, v in later[1].items() if k != "refusal"}
        assert http.post("/chat/completions", json={"model": "flaky", "messages": later, "tools": TOOLS}
                         ).status_code == 500
        # The request's own fault adds to the file's; its retry overrides the file's.
        throttled = http.post(
            "/chat/completions", json={"model": "flaky+fault=429@0+retry=300", "messages": TASK}
        )
        assert (throttled.status_code, throttled.headers["retry-after-ms"]) == (429, "300")
        file_retry = http.post("/chat/completions", json={"model": "flaky+fault=429@0", "messages": TASK})
        assert file_retry.headers["retry-after-ms"] == "2000"


def test_a_request_fault_overrides_the_file_fault_on_the_same_turn(serve_mock):
    # "The request's own options override" the file's: for one (turn, attempt) the later
    # source's fault must be the one injected, as for every other option.
    script = {"name": "flaky", "options": "fault=429@0", "turns": [{"content": "fine"}]}
    with serve_mock(scenario_files=[script]) as url, httpx.Client(base_url=url) as http:
        from_file = http.post("/chat/completions", json={"model": "flaky", "messages": TASK})
        from_model = http.post("/chat/completions", json={"model": "flaky+fault=500@0", "messages": TASK})
        from_header = http.post("/chat/completions", json={"model": "flaky+fault=500@0", "messages": TASK},
                                headers={"x-mock-options": "fault=401@0"})
    assert [r.status_code for r in (from_file, from_model, from_header)] == [429, 500, 401]


def _request(path_options: str = "", header: str = "") -> Request:
    headers = [(b"x-mock-options", header.encode())] if header else []
    return Request({"type": "http", "path_params": {"options": path_options}, "headers": headers})


def test_scenario_options_sit_between_the_server_defaults_and_every_per_request_source(tmp_path):
    app = create_app(latency_ms=1000, scenario_files=[WEATHER])
    config = app.state.config
    assert resolve(_request(), config, "weather")[1].latency_ms == 50  # file beats server
    assert resolve(_request(), config, "plan")[1].latency_ms == 1000  # built-ins have no file options
    assert resolve(_request("latency=20"), config, "weather")[1].latency_ms == 20
    assert resolve(_request("latency=20"), config, "weather+latency=10")[1].latency_ms == 10
    assert resolve(_request("latency=20", "latency=5"), config, "weather+latency=10")[1].latency_ms == 5


def test_after_last_repeat_answers_the_last_turn_again_and_error_says_the_script_ended(serve_mock):
    ending = {"name": "ending", "turns": [{"content": "Only this."}], "after_last": "error"}
    looping = {"name": "looping", "turns": [{"tool_calls": [{"name": "poll_queue"}]}], "after_last": "repeat"}
    later = [*TASK, {"role": "assistant", "content": "x"}, {"role": "user", "content": "and?"},
             {"role": "assistant", "content": "y"}, {"role": "user", "content": "and?"}]
    with serve_mock(scenario_files=[ending, looping]) as url:
        client = OpenAI(base_url=url, api_key="unused", max_retries=0)
        calls = client.chat.completions.create(model="looping", messages=later, tools=TOOLS
                                               ).choices[0].message.tool_calls
        assert [(c.id, c.function.name) for c in calls] == [("call_2_0", "poll_queue")]
        with pytest.raises(APIStatusError) as ended:
            client.chat.completions.create(model="ending", messages=later)
    assert ended.value.status_code == 400
    assert ended.value.body["code"] == "script_ended"
    assert "has ended at turn 2" in ended.value.body["message"]


def test_a_turn_whose_alternatives_all_fail_is_a_loud_400(serve_mock):
    strict = {"name": "strict", "turns": [[{"if": {"user_contains": "Paris"}, "content": "Paris it is."}]]}
    with serve_mock(scenario_files=[strict]) as url, httpx.Client(base_url=url) as http:
        ok = http.post("/chat/completions", json={"model": "strict", "messages": TASK})
        other = [{"role": "user", "content": "And in Rome?"}]
        refused = http.post("/chat/completions", json={"model": "strict", "messages": other})
    assert ok.json()["choices"][0]["message"]["content"] == "Paris it is."
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "no_alternative")


def test_file_scenarios_are_listed_in_models_with_their_description(weather_url: str):
    models = {m.id: m for m in OpenAI(base_url=weather_url, api_key="unused").models.list().data}
    assert models["weather"].description == WEATHER["description"]
    assert set(scenarios.SCENARIOS) < set(models)


# --- the format -----------------------------------------------------------------------------------


def _convo(*messages: dict[str, Any]) -> scenarios.Conversation:
    return conversation([{"role": "system", "content": "be brief"}, *messages])


def _asks(*ids: str) -> dict[str, Any]:
    """An assistant message calling `weather` once per id."""
    calls = [{"id": i, "type": "function", "function": {"name": "weather", "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _reply_with(condition: dict[str, Any]) -> str:
    """'yes' when `condition` holds for the conversation below, else 'no'."""
    script = compile_scenario({"name": "c", "turns": [{"content": "-"}, [
        {"if": condition, "content": "yes"}, {"content": "no"}]]}, source="test")
    c = _convo(
        {"role": "user", "content": "Weather in Paris, please"},
        _asks("a", "b"),
        {"role": "tool", "tool_call_id": "a", "content": "first: rain"},
        {"role": "tool", "tool_call_id": "b", "content": "second: Sunny, 24 C"},
        {"role": "user", "content": "and Rome?"},
    )
    return script(c).content or ""


@pytest.mark.parametrize(("condition", "expected"), [
    ({"tool_result_contains": "Sunny"}, "yes"),
    ({"tool_result_contains": "rain"}, "no"),  # only the last tool message counts
    ({"tool_result_contains": "sunny"}, "no"),  # case-sensitive
    ({"any_tool_result_contains": "rain"}, "yes"),
    ({"any_tool_result_contains": "rain\nsecond"}, "no"),  # never across two results
    ({"tool_result_matches": r"(?i)sunny, \d+ C$"}, "yes"),
    ({"tool_result_matches": r"^first"}, "no"),
    ({"user_contains": "Paris"}, "yes"),
    ({"user_contains": "Rome"}, "no"),  # the first user message only
    ({"all": [{"user_contains": "Paris"}, {"any_tool_result_contains": "rain"}]}, "yes"),
    ({"all": [{"user_contains": "Paris"}, {"tool_result_contains": "rain"}]}, "no"),
    ({"any": [{"user_contains": "Rome"}, {"tool_result_contains": "24"}]}, "yes"),
    ({"any": [{"user_contains": "Rome"}, {"tool_result_contains": "rain"}]}, "no"),
    ({"user_contains": "Paris", "tool_result_contains": "rain"}, "no"),  # several keys: all hold
    ({"user_contains": "Paris", "tool_result_contains": "Sunny"}, "yes"),
])
def test_conditions_test_what_their_names_say(condition: dict[str, Any], expected: str):
    assert _reply_with(condition) == expected


@pytest.mark.parametrize("pattern", [
    r"(\d{1,3}\.){3}\d{1,3}",
    r"(?i)error.*timed? out",
    # Exponential for a backtracking engine, linear for RE2: accepted.
    r"^(?:\w+\s?){1,8}$",
    r"(?:a*){16}x",
    r"(a+)+$",
    r"(a|ab)*c",
    r"a.*b.*c",
])
def test_regexes_re2_matches_in_linear_time_are_accepted(pattern: str):
    compile_scenario({"name": "r", "turns": [[{"if": {"tool_result_matches": pattern}, "content": "x"}]]},
                     source="test")


def test_tool_result_matches_reads_a_bounded_prefix_of_the_tool_text():
    # Even one unbounded repeat searches in time quadratic in the text (r"\s+$" on a megabyte of
    # spaces takes hours), so the regex sees only the first MAX_MATCH_CHARS characters.
    script = compile_scenario({"name": "m", "turns": [{"content": "-"}, [
        {"if": {"tool_result_matches": "found"}, "content": "yes"}, {"content": "no"}]]}, source="test")

    def reply(tool_text: str) -> str | None:
        return script(_convo(
            {"role": "user", "content": "go"},
            _asks("a"),
            {"role": "tool", "tool_call_id": "a", "content": tool_text},
        )).content

    assert reply(" " * (MAX_MATCH_CHARS - 5) + "found") == "yes"
    assert reply(" " * (MAX_MATCH_CHARS - 4) + "found") == "no"


def test_ids_are_deterministic_unless_given_and_string_arguments_pass_verbatim():
    script = compile_scenario({"name": "ids", "turns": [{"tool_calls": [
        {"name": "a"}, {"name": "b", "id": "mine", "arguments": '{"broken": '}]}],
        "after_last": "repeat"}, source="test")
    for turn in (0, 3):
        messages = [*TASK, *[{"role": "assistant", "content": "x"}] * turn]
        calls = script(conversation(messages)).tool_calls
        assert [(c.id, c.name, c.arguments) for c in calls] == [
            (f"call_{turn}_0", "a", "{}"), ("mine", "b", '{"broken": ')]


def test_toml_and_json_files_compile_to_the_same_scenario(tmp_path: Path):
    (tmp_path / "weather.toml").write_text(WEATHER_TOML)
    from_toml = load_scenarios([tmp_path / "weather.toml"])["weather"]
    from_json = load_scenarios([WEATHER])["weather"]
    assert (from_toml.turns, from_toml.options, from_toml.__doc__) == (
        from_json.turns, from_json.options, from_json.__doc__)


def test_a_folder_loads_every_json_and_toml_file_and_the_name_defaults_to_the_stem(tmp_path: Path):
    write(tmp_path, "alpha.json", {"turns": [{"content": "a"}]})
    (tmp_path / "beta.toml").write_text('[[turns]]\ncontent = "b"\n')
    (tmp_path / "notes.txt").write_text("not a scenario")
    (tmp_path / ".draft.json").write_text("{")
    assert sorted(load_scenarios([tmp_path])) == ["alpha", "beta"]


def test_mock_scenarios_is_colon_separated_for_the_worker_factory(tmp_path: Path, monkeypatch):
    a = write(tmp_path, "a.json", {"turns": [{"content": "a"}]})
    b = write(tmp_path, "b.json", {"turns": [{"content": "b"}]})
    monkeypatch.setenv("MOCK_SCENARIOS", f"{a}:{b}")
    monkeypatch.delenv("MOCK_LOG_LINES", raising=False)  # would configure this process's logging
    assert {"a", "b"} <= set(app_from_env().state.config.scenarios)
