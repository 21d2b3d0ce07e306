from harness.state import (
    SCHEMA_VERSION,
    Approval,
    CancelledBy,
    Intent,
    Rejection,
    RunState,
    ToolRun,
    from_json,
    new_run,
    pending,
    to_json,
)
from harness.usage import Usage


def _call(call_id: str, name: str = "list_files", args: str = "{}") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _full_state() -> RunState:
    s = new_run("task", run_id="n1", meta={"scenario": "plan", "max_turns": None})
    s.messages.append({"role": "assistant", "content": None, "tool_calls": [_call("c1"), _call("c2")]})
    s.messages.append({"role": "tool", "tool_call_id": "c1", "name": "list_files", "content": "ünïcode ✓"})
    s.turns, s.prompt_tokens, s.completion_tokens, s.cost_usd = 1, 204, 23, 0.1 + 0.2
    s.turn_usage = [Usage(prompt_tokens=204, completion_tokens=23)]
    s.status = "interrupted"
    s.interruption = Approval(call_id="c2", tool_name="delete_file", args={"path": "a"}, in_doubt=True)
    s.approved, s.rejections = ["c0"], [Rejection(call_id="c9", reason="no")]
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


def test_every_interruption_round_trips():
    for stop in (Approval(call_id="c", tool_name="t", args=[1]), CancelledBy(reason="user pressed Stop")):
        s = new_run("t")
        s.status, s.interruption = "interrupted", stop
        assert from_json(to_json(s)).interruption == stop
    assert f'"schema_version": {SCHEMA_VERSION}' in to_json(s)


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
    assert new_run("x", system=None).messages == [{"role": "user", "content": "x"}]
