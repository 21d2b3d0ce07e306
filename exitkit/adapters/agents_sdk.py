"""The OpenAI Agents SDK (`openai-agents`) as an exitkit adapter, written as its docs write it.

A Chat Completions model over the mock, each kit tool a `FunctionTool` with the SDK's own
default error handling (`default_tool_error_function`, as `@function_tool` applies it),
`Runner.run(max_turns=...)`, `needs_approval` with `RunState.to_string()` saved for a resume
in another process, and `RunResultStreaming.cancel()` for Stop. Tracing is switched off: it
would export spans to OpenAI's servers. No spending limit exists in the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ItemHelpers,
    MaxTurnsExceeded,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    Runner,
    RunState,
    set_tracing_disabled,
)
from agents.tool import default_tool_error_function
from openai import AsyncOpenAI

from exitkit import Approve, Decision, Job, Outcome, Reject
from exitkit import Tool as KitTool

set_tracing_disabled(True)
ErrorFunction = Callable[[RunContextWrapper[Any], Exception], str]


def _explained(ctx: RunContextWrapper[Any], error: Exception) -> str:
    return str(error)


def _function_tool(tool: KitTool, job: Job, on_error: ErrorFunction) -> FunctionTool:
    async def invoke(ctx: Any, arguments: str) -> str:
        try:
            return await tool.call(**json.loads(arguments or "{}"))
        except Exception as e:  # what @function_tool does with its failure_error_function
            return on_error(ctx, e)

    return FunctionTool(name=tool.name, description=tool.description, params_json_schema=tool.parameters,
                        on_invoke_tool=invoke, strict_json_schema=False,
                        needs_approval=tool.name in job.limits.needs_approval)


class AgentsSDK:
    name = "OpenAI Agents SDK"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})
    on_error: ErrorFunction = staticmethod(default_tool_error_function)

    def _agent(self, job: Job, client: AsyncOpenAI) -> Agent:
        # Streamed, so Stop has `RunResultStreaming.cancel()`; with usage, so every reply is billed.
        return Agent(name="files", instructions=job.system,
                     model=OpenAIChatCompletionsModel(model=job.model, openai_client=client),
                     model_settings=ModelSettings(include_usage=True),
                     tools=[_function_tool(t, job, self.on_error) for t in job.tools])

    async def run(self, job: Job) -> Outcome:
        async with AsyncOpenAI(base_url=job.base_url, api_key=job.api_key) as client:
            agent = self._agent(job, client)
            result = Runner.run_streamed(agent, job.task, max_turns=job.limits.max_turns or 50)
            return await self._finish(job, result)

    async def _finish(self, job: Job, result: Any) -> Outcome:
        async def press() -> None:
            await job.cancel.wait()
            result.cancel()

        watcher = asyncio.ensure_future(press())
        try:
            async for _ in result.stream_events():
                pass
        except MaxTurnsExceeded as error:  # the SDK's own answer at the cap: the run so far, on the error
            return replace(Outcome.raised(error), transcript_messages=_items(error))
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        # Everything a new process needs: the items so far (after Stop), the state (at an approval).
        (job.state_dir / "items.json").write_text(json.dumps(result.to_input_list(), default=str))
        if result.interruptions:
            (job.state_dir / "state.json").write_text(result.to_state().to_string())
            item = result.interruptions[0]
            return Outcome(status="interruptions", answer=f"{item.name}({item.arguments})")
        if job.cancel.is_set():
            return Outcome(status="cancelled")
        return Outcome(status="returned", answer=str(result.final_output))

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        async with AsyncOpenAI(base_url=job.base_url, api_key=job.api_key) as client:
            agent = self._agent(job, client)
            if decision is None:  # after Stop or a cap: go on from the items saved
                payload: Any = json.loads((job.state_dir / "items.json").read_text())
            else:
                payload = await RunState.from_string(agent, (job.state_dir / "state.json").read_text())
                for item in payload.get_interruptions():
                    if isinstance(decision, Approve):
                        payload.approve(item)
                    elif isinstance(decision, Reject):
                        payload.reject(item, rejection_message=decision.reason)
            result = Runner.run_streamed(agent, payload, max_turns=job.limits.max_turns or 50)
            return await self._finish(job, result)


class AgentsSDKExplained(AgentsSDK):
    """The documented setting for tool errors: a `failure_error_function` that returns the error."""

    name = "OpenAI Agents SDK, failure_error_function=str(error)"
    on_error = staticmethod(_explained)


def _items(error: MaxTurnsExceeded) -> int | None:
    """The input items (messages, calls, outputs) the error's `run_data` hands back, if any."""
    data = error.run_data
    if data is None:
        return None
    return len(ItemHelpers.input_to_new_input_list(data.input)) + len(data.new_items)
