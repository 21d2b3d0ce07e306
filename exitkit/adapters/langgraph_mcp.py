"""The LangGraph adapter with the kit's tools over MCP: listed and called at `job.mcp_url` with the
official `mcp` SDK's `Client`, in place of `job.tools` (everything else, `interrupt()` for approval
included, as `langgraph`). Not `langchain-mcp-adapters`: every release of it needs `mcp<2`, the
kit's MCP server `mcp` 2, and both cannot be imported in one process. An `isError` result goes
back to the model as its text, as langchain-mcp-adapters' default (`handle_tool_errors=True`) does."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from functools import partial

from mcp import Client

from exitkit import Job
from exitkit import Tool as KitTool
from exitkit.adapters.langgraph import LangGraph


class LangGraphOverMCP(LangGraph):
    name = "LangGraph, tools over MCP"
    tools = "mcp"  # the kit serves job.tools at job.mcp_url

    @contextlib.asynccontextmanager
    async def _kit_tools(self, job: Job) -> AsyncIterator[tuple[KitTool, ...]]:
        async with Client(job.mcp_url) as mcp:
            async def call(name: str, **arguments: object) -> str:
                result = await mcp.call_tool(name, arguments)
                return "\n".join(block.text for block in result.content if block.type == "text")

            listed = (await mcp.list_tools()).tools
            yield tuple(KitTool(name=t.name, description=t.description or "", parameters=t.input_schema,
                                call=partial(call, t.name)) for t in listed)
