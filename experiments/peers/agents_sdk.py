"""The OpenAI Agents SDK (`openai-agents`) at the chapter's exits, written as its docs write it.

Chat Completions model over our mock, `@function_tool` tools, `Runner.run(max_turns=...)`,
`failure_error_function` for tool errors, `needs_approval` + `RunState.to_string()` for a resume
in another process, and `RunResultStreaming.cancel()` for Stop. Tracing is switched off: it
would export spans to OpenAI's servers, and nothing here may touch the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from agents import (
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    Runner,
    RunState,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from experiments.peers.case import API_KEY, Case, Ending, stop_button

NAME, PACKAGE = "OpenAI Agents SDK", "openai-agents"
SPEND_LIMITS = "none (only `max_turns`)"
ERROR_SETTING = "failure_error_function returning str(error)"
"""What `tool_error(documented=True)` switches on."""

set_tracing_disabled(True)


def _error_text(ctx: RunContextWrapper[Any], error: Exception) -> str:
    return str(error)


@asynccontextmanager
async def _agent(case: Case, scenario: str, *, explain_errors: bool = False) -> AsyncIterator[Agent]:
    folder = case.folder
    errors = {"failure_error_function": _error_text} if explain_errors else {}

    @function_tool(description_override=folder.describe("list_files"), **errors)
    def list_files() -> str:
        return folder.list_files()

    @function_tool(description_override=folder.describe("read_file"), **errors)
    def read_file(path: str) -> str:
        return folder.read_file(path)

    @function_tool(description_override=folder.describe("delete_file"), needs_approval=True)
    def delete_file(path: str) -> str:
        return folder.delete_file(path)

    @function_tool(description_override=folder.describe("scan_archive"))
    async def scan_archive() -> str:
        return await folder.scan_archive()

    async with AsyncOpenAI(base_url=case.base_url, api_key=API_KEY) as client:
        yield Agent(name="files", instructions=case.folder.system(),
                    model=OpenAIChatCompletionsModel(model=scenario, openai_client=client),
                    tools=[list_files, read_file, delete_file, scan_archive])


async def run(case: Case, scenario: str, cap: int) -> Ending:
    try:
        async with _agent(case, scenario) as agent:
            result = await Runner.run(agent, case.task(scenario), max_turns=cap)
    except MaxTurnsExceeded as e:
        return Ending.raised(e)
    return Ending(how="returned", text=str(result.final_output))


def caps(cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    return [(f"max_turns={cap}", lambda case: run(case, "runaway", cap))]


async def tool_error(case: Case, documented: bool) -> Ending:
    try:
        async with _agent(case, "recover", explain_errors=documented) as agent:
            result = await Runner.run(agent, case.task("recover"), max_turns=10)
    except Exception as e:  # what escapes is the measurement
        return Ending.raised(e)
    return Ending(how="returned", text=str(result.final_output))


def budgets(usd: float, outside_cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    """No spend or token limit exists: `max_turns` at the outside cap is the only bound."""
    return [("none exists", lambda case: run(case, "runaway", outside_cap))]


async def approval_stop(case: Case) -> Ending:
    async with _agent(case, "destructive") as agent:
        result = await Runner.run(agent, case.task("destructive"), max_turns=8)
    if not result.interruptions:
        return Ending(how="returned", text=str(result.final_output))
    case.state_file.write_text(result.to_state().to_string())
    item = result.interruptions[0]
    return Ending(how="interruptions", text=f"{item.tool_name}({item.arguments})")


async def approval_resume(case: Case) -> Ending:
    async with _agent(case, "destructive") as agent:
        state = await RunState.from_string(agent, case.state_file.read_text())
        for item in state.get_interruptions():
            state.approve(item)
        result = await Runner.run(agent, state, max_turns=8)
    return Ending(how="returned", text=str(result.final_output))


async def stop_slow(case: Case, stop: asyncio.Event) -> Ending:
    async with _agent(case, "slow") as agent:
        result = Runner.run_streamed(agent, case.task("slow"), max_turns=5)
        async with stop_button(stop, result.cancel):
            async for _ in result.stream_events():
                pass
    return Ending(how="returned" if result.final_output else "cancelled",
                  text=str(result.final_output or ""))
