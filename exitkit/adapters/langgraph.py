"""LangGraph (+ `langchain-openai`) as an exitkit adapter, written as its docs write it.

The prebuilt ReAct graph (`create_react_agent`) over `ChatOpenAI` pointed at the mock, each kit
tool a `StructuredTool` with its JSON schema, the turn cap as `recursion_limit` (two graph steps
per turn: the model node, then the tools node), `interrupt()` inside an approval-gated tool with
the sqlite checkpointer (a file another process can open) for approval and resume, and asyncio
task cancellation for Stop. LangGraph 1.x marks `create_react_agent` deprecated in favour of
`langchain.agents.create_agent`, which lives in a package the `peers` extra does not install;
the warning is silenced here, once, for that reason. No spending limit exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import AsyncIterator
from typing import Any

import httpx
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import Command, interrupt
from langgraph.warnings import LangGraphDeprecatedSinceV10

from exitkit import Approve, Decision, Job, Outcome, Reject
from exitkit import Tool as KitTool

THREAD = "exitkit"


def _tool(tool: KitTool, job: Job) -> StructuredTool:
    gated = tool.name in job.limits.needs_approval

    async def call(**arguments: Any) -> str:
        if gated:
            decision = interrupt({"tool": tool.name, "args": arguments})
            if decision is not True:
                return f"Rejected by the user: {decision}"
        return await tool.call(**arguments)

    return StructuredTool(name=tool.name, description=tool.description, args_schema=tool.parameters,
                          coroutine=call)


class LangGraph:
    name = "LangGraph"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})
    handle_tool_errors: bool | None = None
    """None: the prebuilt default (the tool's exception propagates); True: `ToolNode(handle_tool_errors=
    True)`."""
    extra_steps = 0
    """Steps added to `recursion_limit` beyond two per turn (the variants one step either side)."""

    @contextlib.asynccontextmanager
    async def _graph(self, job: Job) -> AsyncIterator[Any]:
        # Our own HTTP client, closed with the run: langchain-openai's default one is cached per
        # process and outlives the event loop of a single run.
        async with httpx.AsyncClient() as http, AsyncSqliteSaver.from_conn_string(
                str(job.state_dir / "checkpoints.sqlite")) as saver, self._kit_tools(job) as kit_tools:
            model = ChatOpenAI(model=job.model, base_url=job.base_url, api_key=job.api_key,
                               http_async_client=http)
            tools: Any = [_tool(t, job) for t in kit_tools]
            if self.handle_tool_errors is not None:
                tools = ToolNode(tools, handle_tool_errors=self.handle_tool_errors)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
                yield create_react_agent(model, tools, prompt=job.system, checkpointer=saver)

    def _kit_tools(self, job: Job) -> contextlib.AbstractAsyncContextManager[tuple[KitTool, ...]]:
        """The tools the graph gets, open while it runs: `job.tools` (`langgraph_mcp`: over MCP)."""
        return contextlib.nullcontext(job.tools)

    async def _invoke(self, job: Job, payload: Any) -> Outcome:
        steps = 2 * (job.limits.max_turns or 25) + self.extra_steps
        config = {"recursion_limit": steps, "configurable": {"thread_id": THREAD}}
        async with self._graph(job) as graph:
            task = asyncio.ensure_future(graph.ainvoke(payload, config))
            stop = asyncio.ensure_future(job.cancel.wait())
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if not task.done():  # no cancel API of its own: the docs cancel the asyncio task
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return Outcome(status="raised CancelledError (task.cancel())")
            result = task.result()
        # `ainvoke` returns the graph's state: the conversation so far is in the caller's hands.
        held = len(result["messages"]) if "messages" in result else None
        if result.get("__interrupt__"):
            return Outcome(status="__interrupt__", answer=str(result["__interrupt__"][0].value),
                           transcript_messages=held)
        return Outcome(status="returned", answer=str(result["messages"][-1].content),
                       transcript_messages=held)

    async def run(self, job: Job) -> Outcome:
        return await self._invoke(job, {"messages": [("user", job.task)]})

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        if isinstance(decision, Approve):
            return await self._invoke(job, Command(resume=True))
        if isinstance(decision, Reject):
            return await self._invoke(job, Command(resume=decision.reason))
        return await self._invoke(job, None)  # go on from the last checkpoint


class LangGraphHandled(LangGraph):
    """The documented setting for tool errors: `ToolNode(handle_tool_errors=True)`."""

    name = "LangGraph, ToolNode(handle_tool_errors=True)"
    handle_tool_errors = True


class LangGraphStepLess(LangGraph):
    name = "LangGraph, recursion_limit one step less"
    extra_steps = -1


class LangGraphStepMore(LangGraph):
    name = "LangGraph, recursion_limit one step more"
    extra_steps = 1
