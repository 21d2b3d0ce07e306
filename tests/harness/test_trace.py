"""The trace: the chapter's six lines for a run stopped for approval, run id on every line."""

from harness import JsonlTrace, MemoryTrace, new_run
from harness.trace import read_jsonl


def test_six_line_trace_of_a_run_stopped_for_approval(drive, tmp_path):
    memory = MemoryTrace()
    s = drive("destructive", state=new_run("t", run_id="n1"), trace=memory)
    assert [e["type"] for e in memory.events] == [
        "turn", "tool_start", "tool_result", "turn", "approval_required", "run_stopped",
    ]
    turn, start, result, _, approval, stopped = memory.events
    assert list(turn) == ["runId", "type", "turn", "prompt_tokens", "completion_tokens", "total_tokens",
                          "costUsd", "finish"]
    assert turn["total_tokens"] == turn["prompt_tokens"] + turn["completion_tokens"]
    assert (turn["turn"], turn["finish"]) == (1, "tool_calls")
    assert start == {
        "runId": "n1", "type": "tool_start", "toolName": "list_files", "args": "{}", "callId": "c1"
    }
    assert list(result) == ["runId", "type", "toolName", "ms", "ok"] and result["ok"] is True
    assert approval == {"runId": "n1", "type": "approval_required", "toolName": "delete_file",
                        "args": '{"path":"access.log"}', "callId": "c2"}
    assert stopped == {"runId": "n1", "type": "run_stopped", "status": "interrupted", "reason": "approval",
                       "turns": 2, "costUsd": round(s.cost_usd, 9)}
    assert memory.lines()[0].startswith('{"runId":"n1","type":"turn","turn":1,"prompt_tokens":')


def test_jsonl_sink_appends_one_object_per_line(drive, tmp_path):
    path = tmp_path / "trace.jsonl"
    drive("plan", state=new_run("t", run_id="a"), trace=JsonlTrace(path))
    drive("once", state=new_run("t", run_id="b"), trace=JsonlTrace(path))
    events = read_jsonl(path)
    assert {e["runId"] for e in events} == {"a", "b"}
    assert [e["costUsd"] for e in events if e["runId"] == "a" and e["type"] == "turn"] == sorted(
        e["costUsd"] for e in events if e["runId"] == "a" and e["type"] == "turn"
    )


def test_progress_is_traced(drive):
    from harness.chapter import ScanArchive

    memory = MemoryTrace()
    drive("slow", tools=[ScanArchive(seconds=0.06)], trace=memory)
    labels = [e["label"] for e in memory.of_type("tool_progress")]
    assert labels == [f"scanned {n} of 1200 files" for n in range(200, 1201, 200)]
