"""The tool side: a scripted MCP server in the mock (docs/mcp.md).

Scenario files script its tools, resources and prompts (`mcp.script`); the mock serves them at
`/mcp` over Streamable HTTP (`mcp.http`) and `python -m mockprovider mcp` over stdio
(`mcp.stdio`), both built on the official `mcp` SDK, which is imported only when an MCP client
connects.
"""

from mockprovider.mcp.callable import CallableTool, McpOptions, ToolRequest
from mockprovider.mcp.calls import ToolCall, tool_calls
from mockprovider.mcp.ledger import Effect, Ledger
from mockprovider.scripts.mcp_tools import McpScript, Step

__all__ = ["CallableTool", "Effect", "Ledger", "McpOptions", "McpScript", "Step", "ToolCall", "ToolRequest",
           "tool_calls"]
