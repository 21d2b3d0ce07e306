"""Every scenario's script, turn by turn, and statelessness over the wire."""

from __future__ import annotations

import json

import httpx
import pytest

from mockprovider.reading import transcript
from mockprovider.scripts import scenarios
from mockprovider.scripts.scenarios import SCENARIOS, Reply, ToolCall

USER = {"role": "user", "content": "Go."}
FOLDER = "The folder holds errors.log, access.log, notes.txt and private.key."


def at(turn: int, *results: str) -> scenarios.Conversation:
    """The conversation at `turn`: `turn` assistant tool calls, each answered by the next result ('ok')."""
    messages: list[dict] = [USER]
    for i in range(turn):
        call = {"id": f"x{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"x{i}", "content": results[i] if i < len(results) else "ok"}
        )
    return transcript.conversation(messages)


def call(name: str, turn: int, *results: str) -> tuple[str, str, dict]:
    """(id, name, parsed arguments) of the single tool call `name` asks at `turn`."""
    reply = SCENARIOS[name](at(turn, *results))
    assert reply.content is None
    (only,) = reply.tool_calls
    return only.id, only.name, json.loads(only.arguments)


def text(name: str, turn: int, *results: str) -> str:
    reply = SCENARIOS[name](at(turn, *results))
    assert not reply.tool_calls
    assert isinstance(reply.content, str)
    return reply.content


def test_scenario_table_lists_the_chapters_scenarios():
    assert list(SCENARIOS) == [
        "plan",
        "runaway",
        "recover",
        "denied",
        "once",
        "repeat",
        "destructive",
        "double_delete",
        "slow",
        "research",
    ]


def test_conversation_derives_turn_and_tool_text():
    conversation = at(3, "a", "b\nc", "")
    assert conversation.turn == 3
    assert conversation.tool_text == "a\nb\nc\n"
    assert conversation.last_tool_result == ""
    assert transcript.conversation([USER]).turn == 0
    assert transcript.conversation([USER]).last_tool_result == ""


def test_plan():
    assert call("plan", 0) == ("c1", "list_files", {})
    assert call("plan", 1) == ("c2", "read_file", {"path": "errors.log"})
    assert text("plan", 2) == "errors.log mentions a timeout: worker 7 timed out after 30000 ms."


def test_runaway_asks_list_files_forever_with_ids_c0_to_cn():
    assert [call("runaway", t) for t in range(60)] == [(f"c{t}", "list_files", {}) for t in range(60)]


def test_recover_follows_the_hint():
    hint = "read_file: no such file 'timeout.log'. Call list_files to see the folder."
    assert call("recover", 0) == ("c1", "read_file", {"path": "timeout.log"})
    assert call("recover", 1, hint) == ("c2", "list_files", {})
    assert call("recover", 2, hint, "errors.log\naccess.log") == ("c3", "read_file", {"path": "errors.log"})
    assert text("recover", 3, hint, "errors.log", "timeout") == "errors.log mentions a timeout."


def test_recover_gives_up_without_the_hint():
    assert text("recover", 1, "read_file: no such file 'timeout.log'.") == (
        "I could not read the file, so I do not know."
    )
    assert text("recover", 1, "") == "I could not read the file, so I do not know."


def test_denied_asks_for_the_private_key_forever():
    assert [call("denied", t, *["permission denied"] * t) for t in range(20)] == [
        (f"c{t + 1}", "read_file", {"path": "private.key"}) for t in range(20)
    ]


def test_once_lists_then_answers():
    assert call("once", 0) == ("c1", "list_files", {})
    assert text("once", 1) == FOLDER


def test_repeat_asks_the_identical_call_twice_under_new_ids():
    first, second = call("repeat", 0), call("repeat", 1)
    assert first == ("c1", "list_files", {}) and second == ("c2", "list_files", {})
    assert (
        SCENARIOS["repeat"](at(0)).tool_calls[0].arguments
        == SCENARIOS["repeat"](at(1)).tool_calls[0].arguments
    )
    assert text("repeat", 2) == FOLDER


@pytest.mark.parametrize(
    ("last_result", "answer"),
    [
        ("The user declined the deletion.", "I did not delete anything: you declined the deletion."),
        ("REJECTED by the approval policy", "I did not delete anything: you declined the deletion."),
        ("", "Deleted access.log to free space."),
        ("deleted access.log", "Deleted access.log to free space."),
    ],
    ids=["declined", "rejected", "empty", "deleted"],
)
def test_destructive_believes_the_last_tool_result(last_result, answer):
    assert call("destructive", 0) == ("c1", "list_files", {})
    assert call("destructive", 1, "access.log") == ("c2", "delete_file", {"path": "access.log"})
    assert text("destructive", 2, "access.log", last_result) == answer


def test_destructive_looks_only_at_the_last_tool_result():
    assert text("destructive", 2, "declined once", "") == "Deleted access.log to free space."


def test_double_delete_asks_the_same_delete_twice():
    assert call("double_delete", 0) == ("c1", "delete_file", {"path": "access.log"})
    assert call("double_delete", 1, "deleted") == ("c2", "delete_file", {"path": "access.log"})
    assert text("double_delete", 2, "deleted", "no such file") == "Done: access.log is deleted."


def test_slow_answers_from_the_scan():
    assert call("slow", 0) == ("c1", "scan_archive", {})
    assert text("slow", 1, "3 archives, 12 GB") == "The archive scan says: 3 archives, 12 GB"


def test_research_answers_from_the_summary():
    assert call("research", 0) == ("c1", "research", {"question": "Which file mentions a timeout?"})
    assert (
        text("research", 1, "errors.log mentions a timeout.")
        == "Research summary: errors.log mentions a timeout."
    )


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios_are_pure_functions_of_the_conversation(name):
    for turn in range(5):
        first, second = (
            SCENARIOS[name](at(turn, "Call list_files")),
            SCENARIOS[name](at(turn, "Call list_files")),
        )
        assert first == second
        assert isinstance(first, Reply)
        assert bool(first.content is not None) != bool(first.tool_calls), "prose or tool calls, never both"
        assert all(isinstance(c, ToolCall) for c in first.tool_calls)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_scenario_has_a_one_line_description(name):
    description = scenarios.describe(SCENARIOS[name])
    assert description and "\n" not in description


def _step(client: httpx.Client, model: str, messages: list[dict], result: str) -> dict:
    """One turn over the wire; append the reply and a tool result for each call. Returns the message."""
    tools = [{"type": "function", "function": {"name": n}} for n in ("list_files", "read_file", "delete_file")
             ]
    response = client.post("/chat/completions", json={"model": model, "messages": messages, "tools": tools})
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    messages.append(
        {
            "role": "assistant",
            "content": message["content"],
            **({"tool_calls": message["tool_calls"]} if message.get("tool_calls") else {}),
        }
    )
    messages.extend(
        {"role": "tool", "tool_call_id": c["id"], "content": result} for c in message.get("tool_calls") or ()
    )
    return message


def test_interleaved_conversations_get_independent_answers(mock_url):
    declined: list[dict] = [USER]
    accepted: list[dict] = [USER]
    plan: list[dict] = [USER]
    with httpx.Client(base_url=mock_url) as client:
        seen = []
        for _ in range(3):
            for model, messages, result in (
                ("destructive", declined, "declined by the user"),
                ("plan", plan, "ok"),
                ("destructive", accepted, ""),
            ):
                seen.append(_step(client, model, messages, result))
        replay = _step(client, "destructive", declined[:5], "declined")
    assert [m["tool_calls"][0]["id"] if m.get("tool_calls") else m["content"] for m in seen] == [
        "c1",
        "c1",
        "c1",
        "c2",
        "c2",
        "c2",
        "I did not delete anything: you declined the deletion.",
        "errors.log mentions a timeout: worker 7 timed out after 30000 ms.",
        "Deleted access.log to free space.",
    ]
    # A conversation cut back to an earlier turn and resent is answered as that turn again.
    assert replay["content"] == seen[6]["content"]


def test_tool_content_given_as_parts_reads_as_its_text():
    from mockprovider.reading.transcript import conversation

    parts = [{"type": "text", "text": "scan "}, {"type": "text", "text": "ok"}]
    messages = [
        {"role": "user", "content": "scan"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "scan_archive", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": parts},
    ]
    assert SCENARIOS["slow"](conversation(messages)).content == "The archive scan says: scan ok"
    assert conversation(messages).tool_text == "scan ok"
