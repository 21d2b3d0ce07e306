"""Model and tool traffic in one journal, in order; the `mock_llm` fixture's `mcp_url` and
`tool_calls`; `GET /journal` filtered by kind, tool and session."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp_support import served
from openai import AsyncOpenAI

from mockprovider.journal import Journal

RECOVER = {
    "name": "recover_mcp",
    "description": "The chapter's recover scenario, its read_file an MCP tool.",
    "turns": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "timeout.log"}, "id": "c1"}]},
        [{"if": {"tool_result_contains": "Call list_files"}, "content": "errors.log mentions a timeout."},
         {"content": "I could not read the file, so I do not know."}],
    ],
    "mcp": {"tools": [{
        "name": "read_file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "calls": [{"is_error": True,
                   "text": "no such file: timeout.log. Call list_files to see what exists."}],
        "after_last": "repeat"}]},
}


async def agent(base_url: str, mcp_url: str, task: str) -> str:
    """A plain agent loop: the model through the OpenAI client, its tools through MCP."""
    async with Client(mcp_url) as tools, AsyncOpenAI(base_url=base_url, api_key="test") as model:
        offered = [{"type": "function", "function": {"name": t.name, "parameters": t.input_schema}}
                   for t in (await tools.list_tools()).tools]
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for _ in range(5):
            reply = (await model.chat.completions.create(model="recover_mcp", messages=messages,
                                                         tools=offered)).choices[0].message
            if not reply.tool_calls:
                return reply.content or ""
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls:
                result = await tools.call_tool(call.function.name, json.loads(call.function.arguments))
                text = "\n".join(block.text for block in result.content)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    raise AssertionError("no answer in five turns")


@pytest.mark.mock_llm(scenarios=[RECOVER])
def test_one_journal_reads_the_exchange_in_order(mock_llm):
    answer = asyncio.run(agent(mock_llm.base_url, mock_llm.mcp_url, "What does timeout.log say?"))
    assert answer == "errors.log mentions a timeout."
    story = []
    for entry in mock_llm.journal:
        body = entry.body
        if entry.kind == "model":
            story.append(f"model turn {sum(m['role'] == 'assistant' for m in body['messages'])}")
        elif isinstance(body, dict) and body.get("method") == "tools/call":
            story.append(f"tool call {body['params']['name']}")
        elif entry.direction == "out" and entry.tool is not None:
            story.append(f"tool result {entry.tool}")
    assert story == ["model turn 0", "tool call read_file", "tool result read_file", "model turn 1"]
    (call,) = mock_llm.tool_calls("read_file")
    assert (call.arguments, call.outcome, call.effect) == ({"path": "timeout.log"}, "tool_error", False)
    assert "Call list_files" in call.text
    assert mock_llm.tool_calls("nothing_of_the_kind") == []


def test_the_journal_endpoint_filters_by_kind_tool_and_session():
    async def two_sessions(url: str) -> None:
        for path in ("timeout.log", "errors.log"):
            async with Client(url) as client:
                await client.call_tool("read_file", {"path": path})
                await client.call_tool("scan", {})

    with served() as mock:
        asyncio.run(two_sessions(mock.mcp_url))
        httpx.post(f"{mock.root}/v1/chat/completions", json={"model": "toolbox", "messages": [
            {"role": "user", "content": "hi"}]}).raise_for_status()

        def journal(**query: str) -> list[dict[str, Any]]:
            return httpx.get(f"{mock.root}/journal", params=query).json()["data"]

        everything, mcp, model = journal(), journal(kind="mcp"), journal(kind="model")
        scans = journal(tool="scan")
        session = scans[0]["session"]
        one = journal(session=session, tool="read_file")
    assert len(everything) == len(mcp) + len(model) and [e["path"] for e in model] == ["/v1/chat/completions"]
    assert {e["kind"] for e in mcp} == {"mcp"} and "kind" not in model[0]  # a model entry reads as before
    assert {e["tool"] for e in scans} == {"scan"} and {e["direction"] for e in scans} == {"in", "out"}
    assert len({e["session"] for e in scans}) == 2
    assert [(e["direction"], e["body"].get("method")) for e in one] == [("in", "tools/call"), ("out", None)]
    assert one[0]["body"]["params"]["arguments"] == {"path": "timeout.log"}
    assert all(e["headers"].get("mcp-session-id") in (None, "<redacted>") for e in everything)


def test_an_mcp_entry_keeps_its_facts_and_masks_its_credentials():
    journal = Journal(10)
    journal.record_raw(method="POST", path="/mcp", headers={"authorization": "Bearer sk-1"}, raw=b'{"a":1}',
                       kind="mcp", direction="out", session="s1", tool="scan", status=200)
    journal.record_raw(method="POST", path="/v1/chat/completions", headers={}, raw=b"{}")
    tool, model = journal.entries()
    facts = (tool.kind, tool.direction, tool.session, tool.tool, tool.status)
    assert facts == ("mcp", "out", "s1", "scan", 200)
    assert "sk-1" not in repr(tool) and "kind='mcp'" in repr(tool) and "kind" not in repr(model)
    rendered = json.loads(journal.render())["data"]
    assert rendered[0]["headers"] == {"authorization": "<redacted>"} and rendered[0]["status"] == 200
    assert set(rendered[1]) == {"seq", "method", "path", "test_id", "headers", "body"}


OTHER = {"name": "other", "turns": [{"content": "x"}],
         "mcp": {"tools": [{"name": "greet", "calls": [{"text": "hello"}, {"text": "again"}]}]}}


@pytest.mark.mock_llm(scenarios=[OTHER])
def test_the_shared_mock_serves_each_test_s_tools_and_counts_their_calls_afresh(mock_llm_shared):
    async def greet(url: str) -> list[str]:
        async with Client(url) as client:
            return [(await client.call_tool("greet", {})).content[0].text for _ in range(2)]

    assert asyncio.run(greet(mock_llm_shared.mcp_url + "/other")) == ["hello", "again"]
    mock_llm_shared.configure(scenarios=[OTHER])  # a fresh set-up: its calls count from 0 again
    assert asyncio.run(greet(mock_llm_shared.mcp_url)) == ["hello", "again"]
    assert [c.outcome for c in mock_llm_shared.tool_calls("greet")] == ["result"] * 4
