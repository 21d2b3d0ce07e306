import json

import pytest

from harness.codec import StateFileError, from_json, to_dict, to_json
from harness.state import (
    SCHEMA_VERSION,
    Approval,
    Approved,
    CancelledBy,
    Completed,
    Failed,
    Intent,
    MaxBudget,
    MaxTurns,
    Rejection,
    RunState,
    ToolRun,
    new_run,
    pending,
)
from harness.usage import Usage


def _call(call_id: str, name: str = "list_files", args: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _full_state() -> RunState:
    s = new_run("task", system="Be brief.", run_id="n1", meta={"scenario": "plan", "max_turns": None})
    s.messages.append({"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]})
    s.messages.append({"role": "tool", "tool_call_id": "c1", "name": "list_files", "content": "ünïcode ✓"})
    s.turns, s.cost_usd = 1, 0.1 + 0.2
    s.usage = Usage(prompt_tokens=204, completion_tokens=23)
    s.turn_usage = [Usage(prompt_tokens=204, completion_tokens=23)]
    s.stop = Approval(call_id="c2", tool_name="delete_file", args={"path": "a"}, in_doubt=True)
    s.approved = [Approved(call_id="c0", tool_name="delete_file", digest="ab" * 32)]
    s.rejections = [Rejection(call_id="c9", reason="no")]
    s.tool_runs = [ToolRun(tool="list_files", args={}, call_id="c1", ok=True, ms=1.5, details={"x": [1]})]
    s.intents = {"c2": Intent(call_id="c2", tool="delete_file", args={"path": "a"})}
    s.cache, s.elapsed_ms = {"list_files:{}": 3}, 12.25
    return s


def test_json_round_trip_is_lossless():
    s = _full_state()
    back = from_json(to_json(s))
    assert back == s
    assert back.cost_usd == 0.1 + 0.2  # floats survive bit for bit
    assert to_json(back) == to_json(s)


def test_the_encoder_writes_the_very_bytes_of_the_plain_walk_odd_values_included():
    s = _full_state()
    s.meta.update(pair=(1, "two"), usage=Usage(prompt_tokens=1, completion_tokens=2), lone="\udcff",
                  numbered={1: "a"}, deep=[[{"x": [Rejection(call_id="c", reason="r")]}]])
    assert to_json(s) == json.dumps(to_dict(s), separators=(",", ":"), allow_nan=False)
    s.meta["bad"] = float("nan")
    with pytest.raises(ValueError, match="Out of range float"):
        to_json(s)
    s.meta["bad"] = {1, 2}
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        to_json(s)


STOPS = [
    (None, "running"),
    (Completed(), "completed"),
    (Failed(reason="no"), "failed"),
    (MaxTurns(), "max_turns_exceeded"),
    (MaxBudget(), "budget_exceeded"),
    (Approval(call_id="c", tool_name="t", args=[1]), "interrupted"),
    (CancelledBy(reason="user pressed Stop"), "interrupted"),
]


@pytest.mark.parametrize(("stop", "status"), STOPS, ids=[s for _, s in STOPS])
def test_every_stop_round_trips_and_status_derives_from_it(stop, status):
    s = new_run("t")
    s.messages.append({"role": "assistant", "content": "done"})
    s.stop = stop
    back = from_json(to_json(s))
    assert back.stop == stop and back.status == status
    assert back.resumable == (status == "interrupted" or status.endswith("exceeded"))
    assert (back.error == "no") == isinstance(stop, Failed)
    assert f'"schema_version":{SCHEMA_VERSION}' in to_json(s)


def test_a_version_1_file_migrates_to_one_stop_value():
    v1 = {"schema_version": 1, "run_id": "old", "messages": [
        {"role": "user", "content": "t"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "delete_file", "arguments": "{}"}}]}],
        "turns": 1, "prompt_tokens": 10, "completion_tokens": 3, "cost_usd": 0.1, "status": "interrupted",
        "interruption": {"type": "approval", "call_id": "c2", "tool_name": "delete_file", "args": {},
                         "in_doubt": False},
        "approved": ["c2"], "error": None}
    s = from_json(json.dumps(v1))
    assert s.schema_version == SCHEMA_VERSION and s.status == "interrupted"
    assert s.stop == Approval(call_id="c2", tool_name="delete_file", args={})
    assert s.usage == Usage(prompt_tokens=10, completion_tokens=3)
    assert [(a.call_id, a.tool_name) for a in s.approved] == [("c2", "delete_file")]
    failed = from_json(json.dumps({**v1, "status": "failed", "interruption": None, "error": "boom"}))
    assert failed.stop == Failed(reason="boom")


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("stop",), {"type": "completed", "extra": 1}, "stop"),
        (("stop",), {"type": "exploded"}, "stop"),
        (("turn_usage",), [{"prompt_tokens": "12", "completion_tokens": 1}], "turn_usage[0].prompt_tokens"),
        (("tool_runs",), [{"tool": "t", "args": {}, "call_id": "c", "ok": "yes", "ms": 1}],
         "tool_runs[0].ok"),
        (("intents",), {"c1": {"call_id": "c1", "tool": 7, "args": {}}}, "intents['c1'].tool"),
        (("approved",), [{"call_id": "c1"}], "approved[0]"),
        (("messages",), [{"role": "robot", "content": "x"}], "messages[0]"),
        (("cost_usd",), -1000, "cost_usd"),
        (("usage",), {"prompt_tokens": -5, "completion_tokens": 0}, "usage.prompt_tokens"),
        (("elapsed_ms",), 1e400, "elapsed_ms"),
        (("run_id",), "../x", "run id"),
    ],
)
def test_a_wrong_type_or_value_anywhere_is_refused_on_load_naming_the_field(path, value, field):
    data = json.loads(to_json(new_run("t", run_id="r1")))
    data[path[0]] = value
    with pytest.raises(StateFileError, match=field.replace("[", r"\[").replace("]", r"\]")):
        from_json(json.dumps(data))


def test_pending_lists_unanswered_calls_of_the_last_assistant_message():
    s = _full_state()
    assert [c["id"] for c in pending(s)] == ["c2"]
    s.messages.append({"role": "tool", "tool_call_id": "c2", "name": "list_files", "content": "x"})
    assert pending(s) == []
    s.messages.append({"role": "assistant", "content": "done"})
    assert pending(s) == []
    assert pending(new_run("fresh")) == []


def test_new_run_starts_with_system_and_task():
    s = new_run("Which file?", system="Be brief.")
    assert s.messages == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Which file?"}
    ]
    assert s.status == "running" and s.turns == 0 and len(s.run_id) == 8


@pytest.mark.parametrize("bad", ["../../somewhere", "abc\n", "", "a/b", ".hidden", "x" * 129])
def test_new_run_refuses_an_unsafe_run_id(bad):
    with pytest.raises(ValueError, match="not a safe name"):
        new_run("t", run_id=bad)
    assert new_run("x", system=None).messages == [{"role": "user", "content": "x"}]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"messages": []}, "messages"),
        ({"cache": {"list_files:{}": 99}}, "not the index of a tool message"),
        ({"cache": {"list_files:{}": 0}}, "not the index of a tool message"),
        ({"stop": {"type": "completed"}}, "last message is not the assistant"),
    ],
)
def test_fields_that_point_into_the_transcript_are_checked_on_load(fields, problem):
    data = json.loads(to_json(new_run("t", run_id="r1")))
    data.update(fields)
    with pytest.raises(StateFileError, match=problem):
        from_json(json.dumps(data))
