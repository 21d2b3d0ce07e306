"""The kit's tools over MCP: the same `job.tools`, served by the mock's MCP server from the run's
own process, so an adapter may hand `job.mcp_url` to its framework's MCP client.

The server runs in the agent's process (on a thread of its own, on a loopback port), so a tool
called over MCP runs where a wrapped one runs: its ledger lines carry the same pid, a crash after
its effect kills the same process, and the client's `notifications/cancelled` cancels the tool's
task, which the ledger records as `cancelled` as it does for a wrapped call the framework cancels.
A tool that raises answers `isError: true` with the error's text (what the SDKs' own tool wrappers
hand the model). A command adapter's tools are served the same way from the kit's own process
(`exitkit.command`), since its process may be in any language.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exitkit.contract import Tool

MCP = "mcp"
"""An adapter with `tools = "mcp"` gets `job.mcp_url` (and should call the tools there)."""


def _callable(tool: Tool) -> Any:
    from mockprovider.mcp.callable import CallableTool, ToolRequest

    async def call(request: ToolRequest) -> Any:
        try:
            return await tool.call(**request.arguments)
        except Exception as e:  # what the model sees of a failed wrapped call, as an MCP tool error
            return {"content": [{"type": "text", "text": str(e)}], "isError": True}

    return CallableTool(name=tool.name, call=call, description=tool.description,
                        input_schema=tool.parameters,
                        annotations={"readOnlyHint": tool.read_only, "destructiveHint": not tool.read_only})


@contextmanager
def served(tools: tuple[Tool, ...]) -> Iterator[str]:
    """`tools` at an MCP Streamable HTTP URL on 127.0.0.1 while the block runs."""
    from mockprovider.app import create_app
    from mockprovider.server import serve_in_thread

    with serve_in_thread(create_app(mcp_tools=[_callable(t) for t in tools])) as base_url:
        yield base_url.removesuffix("/v1") + "/mcp"
