"""Tools given in code (`CallableTool`), served beside the scripted ones at the same endpoint."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import served

from mockprovider.app import create_app
from mockprovider.mcp import CallableTool, Ledger, Step, ToolRequest, tool_calls
from mockprovider.scripts.mcp_tools import RpcError


async def lookup(request: ToolRequest) -> str:
    await request.progress(1, 2, "asking the warehouse")
    request.effect()
    return f"order {request.arguments['id']}: shipped (call {request.index}, key {request.key})"


async def wait_forever(request: ToolRequest) -> str:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def refuse(request: ToolRequest) -> Step:
    return Step(answer="error", error=RpcError(code=-32010, message="the warehouse is closed"))


async def structured(request: ToolRequest) -> dict:
    return {"content": [{"type": "text", "text": "7"}], "structuredContent": {"n": 7}, "isError": True}


TOOLS = [CallableTool(name="lookup", call=lookup, description="An order's status.",
                      input_schema={"type": "object", "properties": {"id": {"type": "string"}}}),
         CallableTool(name="wait", call=wait_forever), CallableTool(name="refuse", call=refuse),
         CallableTool(name="count", call=structured, annotations={"readOnlyHint": True})]


def test_a_tool_given_in_code_answers_reports_progress_records_effects_and_stops_when_cancelled(tmp_path):
    async def main(url: str) -> tuple:
        progress = []

        async def seen(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        async with Client(url) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            found = await client.call_tool("lookup", {"id": "A17"}, progress_callback=seen,
                                           meta={"idempotencyKey": "k"})
            with anyio.move_on_after(0.3):
                await client.call_tool("wait", {})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("refuse", {})
            counted = await client.call_tool("count", {})
            return listed, found, progress, refused.value.error, counted

    with served(mcp_tools=TOOLS, mcp_ledger=tmp_path) as mock:
        listed, found, progress, refused, counted = asyncio.run(main(mock.mcp_url))
        calls = {c.name: c for c in tool_calls(mock.app.state.config.journal.entries())}
    assert {"lookup", "wait", "refuse", "count", "read_file"} <= set(listed)  # beside the scripted tools
    assert listed["count"].annotations.read_only_hint is True
    assert listed["lookup"].description == "An order's status."
    assert found.content[0].text == "order A17: shipped (call 0, key k)"
    assert progress == [(1, 2, "asking the warehouse")]
    assert (refused.code, refused.message) == (-32010, "the warehouse is closed")
    assert counted.is_error and counted.structured_content == {"n": 7}
    assert {name: c.outcome for name, c in calls.items()} == {
        "lookup": "result", "wait": "cancelled", "refuse": "error", "count": "tool_error"}
    assert calls["lookup"].effect and Ledger(tmp_path).count("lookup", {"id": "A17"}, key="k") == 1


def test_a_tool_in_code_named_like_a_scripted_one_is_served_by_neither_at_the_shared_url():
    async def main(url: str) -> MCPError:
        async with Client(url) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("read_file", {"path": "errors.log"})
            return caught.value

    clash = CallableTool(name="read_file", call=lookup)
    with served(mcp_tools=[clash]) as mock:
        refused = asyncio.run(main(mock.mcp_url))
    assert "defined by <code>, toolbox; connect to /mcp/toolbox" in refused.error.message


def test_tools_in_code_are_checked_when_the_server_is_made():
    with pytest.raises(ValueError, match="two tools given in code share a name"):
        create_app(mcp_tools=[TOOLS[0], TOOLS[0]])
    with pytest.raises(ValueError, match="page holds 1 to 10000 items"):
        create_app(mcp_page_size=0)
