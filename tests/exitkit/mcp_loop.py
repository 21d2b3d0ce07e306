"""Adapters that tell what the kit handed them over MCP: the URL, and the tools listed there."""

from __future__ import annotations

import asyncio

from mcp import Client

from exitkit import Job, Outcome


class ListsOverMcp:
    name = "lists its tools over MCP"
    limits = frozenset()
    tools = "mcp"

    async def run(self, job: Job) -> Outcome:
        assert job.mcp_url is not None
        async with Client(job.mcp_url) as client:
            listed = (await client.list_tools()).tools
            read = await client.call_tool("read_file", {"path": "notes.txt"})
        return Outcome(status="returned", answer=" ".join([job.mcp_url, *(t.name for t in listed),
                                                           read.content[0].text]))


class Wrapped(ListsOverMcp):
    name = "asks for no MCP"
    tools = "wrapped"

    async def run(self, job: Job) -> Outcome:
        return Outcome(status="returned", answer=str(job.mcp_url))


class StopsAndReturns(ListsOverMcp):
    """Cancels its call on Stop and returns at once, closing its client: the cancellation reaches
    the server as the run ends (as LangGraph's cancelled graph does)."""

    name = "stops its MCP call and returns"
    limits = frozenset({"cancel"})

    async def run(self, job: Job) -> Outcome:
        async with Client(job.mcp_url) as client:
            call = asyncio.ensure_future(client.call_tool("scan_archive", {}))
            await job.cancel.wait()
            call.cancel()
        return Outcome(status="cancelled")
