"""pydantic-ai (`pydantic-ai-slim[openai]`) at the chapter's exits, written as its docs write it.

`OpenAIChatModel` over our mock, `@agent.tool_plain` tools, `UsageLimits` for turns, tokens and
money, `ModelRetry` as the documented way to tell the model what went wrong, deferred tools
(`requires_approval=True` → `DeferredToolRequests`) with the message history saved as JSON for a
resume in another process, and `AgentRun.cancel()` (on `agent.iter()`) for Stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from decimal import Decimal

from openai import AsyncOpenAI
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunCancelled,
    UsageLimits,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from experiments.peers.case import API_KEY, Case, Ending, stop_button

NAME, PACKAGE = "pydantic-ai", "pydantic-ai-slim"
SPEND_LIMITS = "`UsageLimits`: `cost_limit`, `input/output/total_tokens_limit`, `request_limit`"
ERROR_SETTING = "the tool raises ModelRetry(str(error))"
"""What `tool_error(documented=True)` switches on."""


@asynccontextmanager
async def _agent(case: Case, scenario: str, *, explain_errors: bool = False) -> AsyncIterator[Agent]:
    async with AsyncOpenAI(base_url=case.base_url, api_key=API_KEY) as client:
        model = OpenAIChatModel(scenario, provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, instructions=case.folder.system(), output_type=[str, DeferredToolRequests])
        _tools(agent, case, explain_errors=explain_errors)
        yield agent


def _tools(agent: Agent, case: Case, *, explain_errors: bool) -> None:
    folder = case.folder

    @agent.tool_plain(description=folder.describe("list_files"))
    def list_files() -> str:
        return folder.list_files()

    @agent.tool_plain(description=folder.describe("read_file"))
    def read_file(path: str) -> str:
        if not explain_errors:
            return folder.read_file(path)
        try:
            return folder.read_file(path)
        except FileNotFoundError as e:
            raise ModelRetry(str(e)) from e

    @agent.tool_plain(description=folder.describe("delete_file"), requires_approval=True)
    def delete_file(path: str) -> str:
        return folder.delete_file(path)

    @agent.tool_plain(description=folder.describe("scan_archive"))
    async def scan_archive() -> str:
        return await folder.scan_archive()


def _ending(output: object) -> Ending:
    if isinstance(output, DeferredToolRequests):
        calls = ", ".join(f"{c.tool_name}({c.args})" for c in output.approvals)
        return Ending(how="DeferredToolRequests", text=calls)
    return Ending(how="returned", text=str(output))


async def _run(case: Case, scenario: str, limits: UsageLimits, *, explain_errors: bool = False) -> Ending:
    try:
        async with _agent(case, scenario, explain_errors=explain_errors) as agent:
            result = await agent.run(case.task(scenario), usage_limits=limits)
    except Exception as e:  # what escapes is the measurement
        return Ending.raised(e)
    return _ending(result.output)


async def run(case: Case, scenario: str, cap: int) -> Ending:
    return await _run(case, scenario, UsageLimits(request_limit=cap))


def caps(cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    return [(f"request_limit={cap}", lambda case: run(case, "runaway", cap))]


async def tool_error(case: Case, documented: bool) -> Ending:
    return await _run(case, "recover", UsageLimits(request_limit=10), explain_errors=documented)


def budgets(usd: float, outside_cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    """The money limit, then its token equivalent ($0.01 buys 5,000 input tokens at $2/M)."""
    tokens = round(usd / 2e-6)
    by_cost = UsageLimits(cost_limit=Decimal(str(usd)), request_limit=outside_cap)
    by_tokens = UsageLimits(input_tokens_limit=tokens, request_limit=outside_cap)
    return [
        (f"cost_limit={usd}", lambda case: _run(case, "runaway", by_cost)),
        (f"input_tokens_limit={tokens:,}", lambda case: _run(case, "runaway", by_tokens)),
    ]


async def approval_stop(case: Case) -> Ending:
    async with _agent(case, "destructive") as agent:
        result = await agent.run(case.task("destructive"), usage_limits=UsageLimits(request_limit=8))
    case.state_file.write_bytes(result.all_messages_json())
    return _ending(result.output)


async def approval_resume(case: Case) -> Ending:
    history = ModelMessagesTypeAdapter.validate_json(case.state_file.read_bytes())
    waiting = [p for m in history for p in getattr(m, "parts", []) if p.part_kind == "tool-call"]
    approvals = {p.tool_call_id: True for p in waiting if p.tool_name == "delete_file"}
    async with _agent(case, "destructive") as agent:
        result = await agent.run(message_history=history, usage_limits=UsageLimits(request_limit=8),
                                 deferred_tool_results=DeferredToolResults(approvals=approvals))
    return _ending(result.output)


async def stop_slow(case: Case, stop: asyncio.Event) -> Ending:
    try:
        async with _agent(case, "slow") as agent:
            async with agent.iter(case.task("slow"), usage_limits=UsageLimits(request_limit=5)) as run:
                async with stop_button(stop, run.cancel):
                    async for _ in run:
                        pass
    except RunCancelled as e:
        return Ending.raised(e)
    return _ending(run.result.output if run.result else None)
