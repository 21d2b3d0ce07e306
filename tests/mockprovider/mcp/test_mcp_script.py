"""A scenario file's `mcp` section: loaded and checked at start-up, steps picked per call."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_support import TOOLBOX

from mockprovider.scripts.files import ScenarioFileError, load_scenarios
from mockprovider.scripts.mcp_conditions import CallFacts
from mockprovider.scripts.mcp_tools import ScriptEnded, ToolScript


def tool(name: str, scenario: dict[str, Any] = TOOLBOX) -> ToolScript:
    (loaded,) = load_scenarios([scenario]).values()
    return next(t for t in loaded.mcp.tools if t.name == name)


def call(name: str, index: int = 0, key: str | None = None, **arguments: Any) -> CallFacts:
    return CallFacts.of(name, arguments, index, key)


def with_tool(**fields: Any) -> dict[str, Any]:
    return {"name": "s", "turns": [{"content": "x"}],
            "mcp": {"tools": [{"name": "t", "calls": [{"text": "ok"}], **fields}]}}


def refusal(scenario: dict[str, Any]) -> str:
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios([scenario])
    return str(caught.value)


def test_the_first_alternative_whose_condition_holds_answers():
    read = tool("read_file")
    assert read.step(call("read_file", path="timeout.log")).is_error
    found = read.step(call("read_file", path="logs/errors.log")).result()
    assert found["content"][0]["text"].startswith("worker 7")
    error = read.step(call("read_file", path="other")).error
    assert (error.code, error.message, error.data) == (-32603, "the disk is on fire", {"disk": 0})


def test_calls_are_answered_by_index_and_after_last_repeats_or_fails_loudly():
    delete = tool("delete_file")
    answers = [delete.step(call("delete_file", i)).answer for i in range(4)]
    assert answers == ["drop", "result", "result", "result"]
    once = tool("once")
    assert once.step(call("once", 0)).result()["content"][0]["text"] == "only once"
    with pytest.raises(ScriptEnded, match=r"'once' .* has ended at call 1: it has 1 calls \(0 to 0\)"):
        once.step(call("once", 1))


def test_no_alternative_holding_is_a_loud_error_naming_the_call():
    scenario = with_tool(calls=[[{"if": {"arguments_contain": "x"}, "text": "x"}]])
    with pytest.raises(ScriptEnded, match="No alternative of call 0 of the tool 't'"):
        tool("t", scenario).step(call("t", y=1))


@pytest.mark.parametrize(("condition", "arguments", "index", "key", "holds"), [
    ({"arguments_contain": '"path":"a.log"'}, {"path": "a.log"}, 0, None, True),
    ({"arguments_contain": "A.LOG"}, {"path": "a.log"}, 0, None, False),
    ({"arguments_match": "(?i)A\\.LOG"}, {"path": "a.log"}, 0, None, True),
    ({"arguments_include": {"n": 1}}, {"n": 1.0, "m": 2}, 0, None, True),
    ({"arguments_include": {"n": 1}}, {"n": True}, 0, None, False),
    ({"arguments_include": {"n": 1}}, {}, 0, None, False),
    ({"call_at_least": 2}, {}, 1, None, False),
    ({"call_at_least": 2}, {}, 2, None, True),
    ({"has_idempotency_key": True}, {}, 0, "k1", True),
    ({"has_idempotency_key": False}, {}, 0, "k1", False),
    ({"not": {"call_at_least": 1}}, {}, 0, None, True),
    ({"any": [{"call_at_least": 5}, {"arguments_contain": "x"}]}, {"x": 1}, 0, None, True),
    ({"all": [{"call_at_least": 5}, {"arguments_contain": "x"}]}, {"x": 1}, 0, None, False),
    ({"call_at_least": 1, "arguments_contain": "x"}, {"x": 1}, 1, None, True),
])
def test_the_condition_language_reads_the_call(condition, arguments, index, key, holds):
    scenario = with_tool(calls=[[{"if": condition, "text": "yes"}, {"text": "no"}]], after_last="repeat")
    step = tool("t", scenario).step(call("t", index, key, **arguments))
    assert (step.result()["content"][0]["text"] == "yes") is holds


def test_structured_content_also_goes_out_as_text_and_an_effect_runs_only_when_the_work_was_done():
    weather = tool("weather").step(call("weather")).result()
    assert weather == {"content": [{"type": "text", "text": '{"c":21.5}'}], "structuredContent": {"c": 21.5}}
    delete = tool("delete_file")
    # A drop loses the answer, not the work.
    assert delete.effect and delete.step(call("delete_file", 0)).runs_effect(True)
    assert not tool("read_file").step(call("read_file", path="timeout.log")).runs_effect(True)
    forced = tool("t", with_tool(calls=[{"error": {"code": 1, "message": "m"}, "effect": True}]))
    assert forced.step(call("t")).runs_effect(False)


@pytest.mark.parametrize(("fields", "where", "problem"), [
    ({"calls": [{}]}, "calls[0]", "expected an answer"),
    ({"calls": [{"text": "a", "hang": True}]}, "calls[0]", "a step answers one way; it gives 'text', 'hang'"),
    ({"calls": [{"hang": True, "is_error": True}]}, "calls[0].is_error", "'is_error' marks a result"),
    ({"calls": [{"if": {"call_at_least": 1}, "text": "a"}]}, "calls[0].if", "belongs on an alternative"),
    ({"calls": [[{"if": {"arguments_contains": "a"}, "text": "a"}]]}, "calls[0][0].if.arguments_contains",
     "unknown key"),
    ({"calls": [[{"if": {"arguments_match": "(a)\\1"}, "text": "a"}]]}, "calls[0][0].if.arguments_match",
     "RE2"),
    ({"calls": [{"text": "a", "delay": -1}]}, "calls[0].delay", "from 0 to 300000"),
    ({"calls": [{"error": {"code": "x", "message": "m"}}]}, "calls[0].error.code", "expected a number"),
    ({"calls": [{"content": [{"type": "video"}]}]}, "calls[0].content[0].type", "content block"),
    ({"calls": [{"content": [{"type": "image", "data": "x"}]}]}, "calls[0].content[0]", "'mimeType'"),
    ({"calls": [{"text": "a"}], "after_last": "loop"}, "after_last", 'expected "repeat" or "error"'),
    ({"calls": [{"text": "a"}], "input_schema": {"type": "string"}}, "input_schema", '"object"'),
    ({"calls": [{"text": "a"}], "effect": "yes"}, "effect", "expected true or false"),
    ({"calls": [{"text": "a"}], "annotations": {"readOnly": True}}, "annotations.readOnly",
     "unknown key"),
    ({"calls": [{"text": "a", "progress": [{"total": 3}]}]}, "calls[0].progress[0]",
     "missing the required key 'progress'"),
])
def test_a_bad_tool_script_is_refused_at_start_up_naming_the_value(fields, where, problem):
    message = refusal(with_tool(**fields))
    assert f"<inline scenario 1>: $.mcp.tools[0].{where}: " in message and problem in message


def test_names_are_checked_for_what_clients_can_address_and_for_repeats():
    scenario = with_tool()
    scenario["mcp"]["tools"][0]["name"] = "has space"
    assert "$.mcp.tools[0].name: the tool name 'has space'" in refusal(scenario)
    twice = with_tool()
    twice["mcp"]["tools"].append(copy.deepcopy(twice["mcp"]["tools"][0]))
    assert "$.mcp.tools[1].name: the tool 't' is scripted twice in this file" in refusal(twice)
    resources = with_tool()
    resources["mcp"]["resources"] = [{"uri": "notes.txt", "name": "n", "text": "x"}]
    assert "$.mcp.resources[0].uri: expected an absolute URI" in refusal(resources)
    prompts = with_tool()
    prompts["mcp"]["prompts"] = [{"name": "p", "messages": [{"role": "system", "text": "x"}]}]
    assert '$.mcp.prompts[0].messages[0].role: expected "user" or "assistant"' in refusal(prompts)
    empty = {"name": "s", "turns": [{"content": "x"}], "mcp": {}}
    assert "$.mcp: expected at least one of: tools, resources, prompts" in refusal(empty)


def test_toml_dates_cannot_reach_the_wire(tmp_path: Path):
    path = tmp_path / "dated.toml"
    path.write_text('name = "dated"\nturns = [{ content = "x" }]\n[[mcp.tools]]\nname = "t"\n'
                    'calls = [{ structured = { when = 2024-01-01 } }]\n')
    with pytest.raises(ScenarioFileError, match=r"calls\[0\]\.structured: expected JSON values only"):
        load_scenarios([path])


def test_the_same_script_in_toml_loads_as_in_json(tmp_path: Path):
    path = tmp_path / "weather.toml"
    path.write_text('name = "weather"\nturns = [{ content = "x" }]\n[[mcp.tools]]\nname = "get_weather"\n'
                    'after_last = "repeat"\n'
                    'calls = [[{ if = { arguments_contain = "Paris" }, text = "rain" }, { text = "sun" }]]\n')
    (json_path := tmp_path / "weather.json").write_text(json.dumps({
        "name": "weather2", "turns": [{"content": "x"}], "mcp": {"tools": [{
            "name": "get_weather", "after_last": "repeat",
            "calls": [[{"if": {"arguments_contain": "Paris"}, "text": "rain"}, {"text": "sun"}]]}]}}))
    loaded = load_scenarios([path, json_path])
    toml_tool, json_tool = (loaded[name].mcp.tools[0] for name in ("weather", "weather2"))
    for city in ("Paris", "Oslo"):
        facts = call("get_weather", city=city)
        assert toml_tool.step(facts) == json_tool.step(facts)


def test_a_file_may_script_only_an_mcp_server_and_then_is_no_model(tmp_path: Path):
    from starlette.testclient import TestClient

    from mockprovider.app import create_app

    tools_only = {"name": "tools_only", "mcp": {"tools": [{"name": "t", "calls": [{"text": "x"}]}]}}
    assert [t.name for t in load_scenarios([tools_only])["tools_only"].mcp.tools] == ["t"]
    with TestClient(create_app(scenario_files=[tools_only])) as client:
        refused = client.post("/v1/chat/completions", json={"model": "tools_only", "messages": [
            {"role": "user", "content": "hi"}]})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "no_turns"
    assert "/mcp/tools_only" in refused.json()["error"]["message"]
    assert "missing the required key 'turns'" in refusal({"name": "neither"})
