"""The official Python MCP client (`mcp.Client`), unchanged, against the mock's `/mcp` over a socket."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_support import TOOLBOX, served

from mockprovider.mcp.calls import tool_calls
from mockprovider.mcp.ledger import Ledger


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_the_handshake_settles_on_2025_11_25_and_lists_the_scripted_tools_page_by_page():
    async def main(url: str) -> tuple[str, list[list[str]]]:
        async with Client(url) as client:
            pages, cursor = [], None
            while True:
                page = await client.list_tools(cursor=cursor)
                pages.append([t.name for t in page.tools])
                if (cursor := page.next_cursor) is None:
                    return client.protocol_version, pages

    with served(mcp_page_size=3) as mock:
        version, pages = run(main(mock.mcp_url))
    assert version == "2025-11-25"
    names = [t["name"] for t in TOOLBOX["mcp"]["tools"]]
    assert pages == [names[0:3], names[3:6], names[6:]]


def test_each_kind_of_scripted_answer_reaches_the_client_as_mcp_says():
    async def main(url: str) -> dict[str, Any]:
        async with Client(url) as client:
            out: dict[str, Any] = {}
            out["error_result"] = await client.call_tool("read_file", {"path": "timeout.log"})
            out["result"] = await client.call_tool("read_file", {"path": "errors.log"})
            out["structured"] = await client.call_tool("weather", {})
            with pytest.raises(MCPError) as failed:
                await client.call_tool("read_file", {"path": "other"})
            out["rpc_error"] = failed.value.error
            return out

    with served() as mock:
        out = run(main(mock.mcp_url))
    assert out["error_result"].is_error and "Call list_files" in out["error_result"].content[0].text
    assert not out["result"].is_error and out["result"].content[0].text == "worker 7 timed out after 30000 ms"
    assert out["structured"].structured_content == {"c": 21.5}
    assert (out["rpc_error"].code, out["rpc_error"].message, out["rpc_error"].data) == (
        -32603, "the disk is on fire", {"disk": 0})


def test_progress_goes_to_a_client_that_sent_a_progress_token_and_to_no_other():
    async def main(url: str) -> list[tuple[float, float | None, str | None]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append((done, total, message))

        async with Client(url) as client:
            await client.call_tool("scan", {}, progress_callback=progress)
            await client.call_tool("scan", {})
        return seen

    with served() as mock:
        seen = run(main(mock.mcp_url))
        sent = [e.body["params"] for e in mock.entries(kind="mcp", direction="out", tool="scan")
                if e.body.get("method") == "notifications/progress"]
    assert seen == [(400, 1200, "a third"), (1200, 1200, None)]
    assert len(sent) == 2  # the second call carried no token: no notifications for it


def test_a_hanging_tool_stops_when_the_client_cancels_and_the_journal_says_so():
    async def main(url: str) -> str:
        async with Client(url) as client:
            with anyio.move_on_after(0.5):
                await client.call_tool("stuck", {})
            return (await client.call_tool("read_file", {"path": "errors.log"})).content[0].text

    with served() as mock:
        after = run(main(mock.mcp_url))
        journal = mock.app.state.config.journal.entries()
    assert after.startswith("worker 7")  # the session serves on after the cancellation
    (call,) = tool_calls(journal, "stuck")
    assert call.outcome == "cancelled"
    cancelled = next(e for e in journal if e.kind == "mcp" and e.body and isinstance(e.body, dict)
                     and e.body.get("method") == "notifications/cancelled")
    stopped = next(e for e in journal if e.direction == "note" and e.body["event"] == "stopped")
    assert cancelled.body["params"]["requestId"] == call.id == stopped.body["id"]
    assert cancelled.seq < stopped.seq


def test_a_dropped_answer_loses_the_connection_but_not_the_work(tmp_path):
    async def main(url: str) -> tuple[str, str]:
        async with Client(url) as client:
            with pytest.raises(MCPError) as lost:
                await client.call_tool("delete_file", {"path": "access.log"}, meta={"idempotencyKey": "k1"})
            retried = await client.call_tool("delete_file", {"path": "access.log"},
                                             meta={"idempotencyKey": "k1"})
            return lost.value.error.message, retried.content[0].text

    with served(mcp_ledger=tmp_path) as mock:
        lost, retried = run(main(mock.mcp_url))
        calls = tool_calls(mock.app.state.config.journal.entries(), "delete_file")
    assert "without a response" in lost and retried == "deleted"
    assert [(c.outcome, c.effect, c.key) for c in calls] == [("dropped", True, "k1"), ("result", True, "k1")]
    assert Ledger(tmp_path).count("delete_file", {"path": "access.log"}, key="k1") == 2  # it ran twice


def test_an_expired_session_answers_404_until_the_client_initialises_a_new_one():
    async def main(url: str) -> tuple[str, MCPError, str]:
        async with Client(url) as client:
            await client.list_tools()  # the client validates results against the listed schemas
            first = (await client.call_tool("short_lived", {})).content[0].text
            with pytest.raises(MCPError) as gone:
                await client.call_tool("short_lived", {})
        async with Client(url) as fresh:
            await fresh.list_tools()
            return first, gone.value, (await fresh.call_tool("short_lived", {})).content[0].text

    with served() as mock:
        first, gone, second = run(main(mock.mcp_url))
        calls = tool_calls(mock.app.state.config.journal.entries(), "short_lived")
    assert (first, gone.error.message, second) == ("first", "Session not found", "second")
    assert [(c.outcome, c.status, c.expired) for c in calls] == [
        ("result", 200, True), ("error", 404, False), ("result", 200, False)]
    assert calls[0].session == calls[1].session != calls[2].session


def test_resources_prompts_and_ping():
    async def main(url: str) -> tuple[Any, ...]:
        async with Client(url, mode="legacy") as client:  # the handshake alone, no discover probe
            listed = await client.list_resources()
            read = await client.read_resource("file:///notes.txt")
            with pytest.raises(MCPError) as missing:
                await client.read_resource("file:///nowhere.txt")
            prompt = await client.get_prompt("triage", {"file": "errors.log"})
            with pytest.raises(MCPError) as incomplete:
                await client.get_prompt("triage", {})
            with pytest.warns(MCPDeprecationWarning, match="ping is removed as of 2026-07-28"):
                pong = await client.send_ping()  # still the method of the era this server speaks
            assert pong.model_dump(exclude_none=True) == {}
            return listed, read, missing.value.error, prompt, incomplete.value.error

    with served() as mock:
        listed, read, missing, prompt, incomplete = run(main(mock.mcp_url))
    assert [(r.name, str(r.uri), r.mime_type) for r in listed.resources] == [
        ("notes", "file:///notes.txt", "text/plain")]
    assert read.contents[0].text == "Remember to rotate your logs."
    assert (missing.code, missing.message) == (-32002, "Resource not found")
    assert prompt.messages[0].content.text == "Find the errors in errors.log."
    assert incomplete.code == -32602 and "file" in incomplete.message


SECOND = {"name": "second", "turns": [{"content": "x"}],
          "mcp": {"tools": [
              {"name": "read_file", "calls": [{"text": "the second script"}], "after_last": "repeat"},
              {"name": "only_here", "calls": [{"text": "here"}], "after_last": "repeat"}]}}


def test_one_scenario_per_url_and_a_name_two_files_define_is_served_by_neither_at_the_shared_url():
    async def names(url: str) -> list[str]:
        async with Client(url) as client:
            return [t.name for t in (await client.list_tools()).tools]

    async def clash(url: str) -> MCPError:
        async with Client(url) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("read_file", {"path": "errors.log"})
            return caught.value

    with served(TOOLBOX, SECOND) as mock:
        everything, toolbox, second = (run(names(mock.mcp_url + at)) for at in ("", "/toolbox", "/second"))
        refused = run(clash(mock.mcp_url))
    assert "read_file" not in everything and {"only_here", "scan"} <= set(everything)
    assert "read_file" in toolbox and second == ["read_file", "only_here"]
    assert refused.error.code == -32602
    assert "defined by second, toolbox; connect to /mcp/second or /mcp/toolbox" in refused.error.message


def test_the_call_index_counts_per_server_across_sessions():
    async def once(url: str) -> list[str]:
        async with Client(url) as client:
            result = await client.call_tool("once", {})
            with pytest.raises(MCPError) as ended:
                await client.call_tool("once", {})
            return [result.content[0].text, ended.value.error.message]

    with served() as mock:
        first = run(once(mock.mcp_url))
    assert first[0] == "only once" and "has ended at call 1" in first[1]


def test_many_clients_open_sessions_at_once_with_the_same_first_ids():
    async def one(url: str) -> str:
        async with Client(url, mode="legacy") as client:
            return (await client.call_tool("read_file", {"path": "errors.log"})).content[0].text

    async def many(url: str) -> list[str]:
        return list(await asyncio.gather(*(one(url) for _ in range(8))))

    with served() as mock:
        assert set(run(many(mock.mcp_url))) == {"worker 7 timed out after 30000 ms"}
