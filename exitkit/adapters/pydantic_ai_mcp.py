"""The pydantic-ai adapter with the kit's tools over MCP: `job.mcp_url` handed to pydantic-ai's own
`MCPToolset`, in place of wrapping `job.tools` (everything else as `pydantic_ai`)."""

from __future__ import annotations

from typing import Any

from pydantic_ai.mcp import MCPToolset

from exitkit import Job
from exitkit.adapters.pydantic_ai import PydanticAI


class PydanticAIOverMCP(PydanticAI):
    name = "pydantic-ai, tools over MCP"
    tools = "mcp"  # the kit serves job.tools at job.mcp_url

    def tools_of(self, job: Job) -> dict[str, Any]:
        gated = job.limits.needs_approval
        server = MCPToolset(job.mcp_url).approval_required(lambda ctx, tool, args: tool.name in gated)
        return {"toolsets": [server]}
