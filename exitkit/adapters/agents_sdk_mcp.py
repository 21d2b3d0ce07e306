"""The Agents SDK adapter with the kit's tools over MCP: `job.mcp_url` handed to the SDK's own
`MCPServerStreamableHttp`, in place of wrapping `job.tools` (everything else as `agents_sdk`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agents import Agent
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

from exitkit import Decision, Job, Outcome
from exitkit.adapters.agents_sdk import AgentsSDK


class AgentsSDKOverMCP(AgentsSDK):
    name = "OpenAI Agents SDK, tools over MCP"
    tools = "mcp"  # the kit serves job.tools at job.mcp_url

    def _server(self, job: Job) -> MCPServerStreamableHttp:
        gated = {name: "always" for name in job.limits.needs_approval}
        return MCPServerStreamableHttp({"url": job.mcp_url}, require_approval=gated, name="kit",
                                       client_session_timeout_seconds=60)

    def _agent(self, job: Job, client: AsyncOpenAI) -> Agent[Any]:
        return super()._agent(replace(job, tools=()), client).clone(mcp_servers=[self.server])

    async def run(self, job: Job) -> Outcome:
        async with self._server(job) as self.server:
            return await super().run(job)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        async with self._server(job) as self.server:
            return await super().resume(job, decision)
