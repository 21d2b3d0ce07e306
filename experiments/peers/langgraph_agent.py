"""LangGraph (+ `langchain-openai`) at the chapter's exits, written as its docs write it.

The prebuilt ReAct graph (`create_react_agent`) over `ChatOpenAI` pointed at our mock, the turn
cap as `recursion_limit` (two graph steps per turn), `ToolNode(handle_tool_errors=...)` for tool
errors, `interrupt()` inside the destructive tool with the sqlite checkpointer (a file another
process can open) for approval, and asyncio task cancellation for Stop. LangGraph 1.x marks
`create_react_agent` deprecated in favour of `langchain.agents.create_agent`, which lives in a
package this extra does not install; the warning is silenced here, once, for that reason.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import Command, interrupt
from langgraph.warnings import LangGraphDeprecatedSinceV10

from experiments.peers.case import API_KEY, Case, Ending, stop_button

NAME, PACKAGE = "LangGraph", "langgraph"
SPEND_LIMITS = "none (only `recursion_limit`, in graph steps)"
ERROR_SETTING = "ToolNode(handle_tool_errors=True)"
"""What `tool_error(documented=True)` switches on."""
THREAD = {"configurable": {"thread_id": "destructive-1"}}


def _tools(case: Case) -> list[Any]:
    folder = case.folder

    @tool(description=folder.describe("list_files"))
    def list_files() -> str:
        return folder.list_files()

    @tool(description=folder.describe("read_file"))
    def read_file(path: str) -> str:
        return folder.read_file(path)

    @tool(description=folder.describe("delete_file"))
    def delete_file(path: str) -> str:
        if not interrupt({"tool": "delete_file", "path": path}):
            return "Rejected by the user."
        return folder.delete_file(path)

    @tool(description=folder.describe("scan_archive"))
    async def scan_archive() -> str:
        return await folder.scan_archive()

    return [list_files, read_file, delete_file, scan_archive]


@asynccontextmanager
async def _graph(case: Case, scenario: str, *, handle_tool_errors: bool | None = None,
                 checkpointer: Any = None) -> AsyncIterator[Any]:
    # Our own HTTP client, closed with the run: langchain-openai's default one is cached per
    # process and outlives the event loop of a single run.
    async with httpx.AsyncClient() as http:
        model = ChatOpenAI(model=scenario, base_url=case.base_url, api_key=API_KEY, http_async_client=http)
        tools: Any = _tools(case)
        if handle_tool_errors is not None:
            tools = ToolNode(tools, handle_tool_errors=handle_tool_errors)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
            yield create_react_agent(model, tools, prompt=case.folder.system(), checkpointer=checkpointer)


def _ending(result: dict[str, Any]) -> Ending:
    if result.get("__interrupt__"):
        return Ending(how="__interrupt__", text=str(result["__interrupt__"][0].value))
    return Ending(how="returned", text=str(result["messages"][-1].content))


async def _invoke(graph: Any, payload: Any, steps: int, thread: dict | None = None) -> Ending:
    config = {"recursion_limit": steps} | (thread or {})
    try:
        return _ending(await graph.ainvoke(payload, config))
    except Exception as e:  # what escapes is the measurement
        return Ending.raised(e)


def _ask(case: Case, scenario: str) -> dict[str, Any]:
    return {"messages": [("user", case.task(scenario))]}


async def run(case: Case, scenario: str, cap: int) -> Ending:
    return await run_steps(case, scenario, 2 * cap)


async def run_steps(case: Case, scenario: str, steps: int) -> Ending:
    async with _graph(case, scenario) as graph:
        return await _invoke(graph, _ask(case, scenario), steps)


def caps(cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    """The documented setting, 2 * cap (one step for the model node, one for the tools node per
    turn), and one step either side of it, to show what the arithmetic buys."""
    return [(f"recursion_limit={steps}", lambda case, steps=steps: run_steps(case, "runaway", steps))
            for steps in (2 * cap, 2 * cap - 1, 2 * cap + 1)]


async def tool_error(case: Case, documented: bool) -> Ending:
    async with _graph(case, "recover", handle_tool_errors=True if documented else None) as graph:
        return await _invoke(graph, _ask(case, "recover"), 20)


def budgets(usd: float, outside_cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    """No spend or token limit exists: `recursion_limit` at the outside cap is the only bound."""
    return [("none exists", lambda case: run(case, "runaway", outside_cap))]


async def approval_stop(case: Case) -> Ending:
    async with AsyncSqliteSaver.from_conn_string(str(case.state_file)) as saver:
        async with _graph(case, "destructive", checkpointer=saver) as graph:
            return await _invoke(graph, _ask(case, "destructive"), 16, THREAD)


async def approval_resume(case: Case) -> Ending:
    async with AsyncSqliteSaver.from_conn_string(str(case.state_file)) as saver:
        async with _graph(case, "destructive", checkpointer=saver) as graph:
            return await _invoke(graph, Command(resume=True), 16, THREAD)


async def stop_slow(case: Case, stop: asyncio.Event) -> Ending:
    """No cancel API of its own: the documented way is to cancel the asyncio task."""
    async with _graph(case, "slow") as graph:
        task = asyncio.create_task(graph.ainvoke(_ask(case, "slow"), {"recursion_limit": 10}))
        async with stop_button(stop, task.cancel):
            try:
                return _ending(await task)
            except asyncio.CancelledError:
                return Ending(how="raised CancelledError (task.cancel())")
