"""pydantic-ai (`pydantic-ai-slim[openai]`) as an exitkit adapter, written as its docs write it.

`OpenAIChatModel` over the mock, each kit tool a `Tool.from_schema` (approval-gated ones with
`requires_approval`), `UsageLimits(request_limit=..., cost_limit=...)` for the turn cap and the
budget, deferred tools (`DeferredToolRequests`) with the message history saved as JSON for a
resume in another process, and `AgentRun.cancel()` (on `agent.iter()`) for Stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from decimal import Decimal
from typing import Any

from openai import AsyncOpenAI
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    Tool,
    ToolDenied,
    UsageLimits,
)
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from exitkit import Approve, Decision, Job, Outcome
from exitkit import Tool as KitTool

HISTORY = "messages.json"


def _tool(tool: KitTool, job: Job, retry_errors: bool) -> Tool:
    async def call(**arguments: Any) -> str:
        if not retry_errors:
            return await tool.call(**arguments)
        try:
            return await tool.call(**arguments)
        except (FileNotFoundError, ValueError) as e:  # the documented way to tell the model what failed
            raise ModelRetry(str(e)) from e

    made = Tool.from_schema(call, name=tool.name, description=tool.description, json_schema=tool.parameters)
    made.requires_approval = tool.name in job.limits.needs_approval
    return made


class PydanticAI:
    name = "pydantic-ai"
    limits = frozenset({"max_turns", "max_budget_usd", "approval", "cancel", "resume"})
    retry_errors = False

    def usage_limits(self, job: Job) -> UsageLimits:
        budget = job.limits.max_budget_usd
        return UsageLimits(request_limit=job.limits.max_turns,
                           cost_limit=None if budget is None else Decimal(str(budget)))

    def tools_of(self, job: Job) -> dict[str, Any]:
        """`Agent`'s tool arguments: the kit's tools, each wrapped."""
        return {"tools": [_tool(t, job, self.retry_errors) for t in job.tools]}

    async def _go(self, job: Job, prompt: str | None, history: Any = None, results: Any = None) -> Outcome:
        async with AsyncOpenAI(base_url=job.base_url, api_key=job.api_key) as client:
            model = OpenAIChatModel(job.model, provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, instructions=job.system, output_type=[str, DeferredToolRequests],
                          **self.tools_of(job))
            async with agent.iter(prompt, message_history=history, deferred_tool_results=results,
                                  usage_limits=self.usage_limits(job)) as run:

                async def press() -> None:
                    await job.cancel.wait()
                    run.cancel()

                watcher = asyncio.ensure_future(press())
                try:
                    async for _ in run:
                        pass
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                    # Saved where the docs save it: when the run stops for approval (and after Stop).
                    output = run.result.output if run.result else None
                    if job.cancel.is_set() or isinstance(output, DeferredToolRequests):
                        history = ModelMessagesTypeAdapter.dump_json(run.all_messages())
                        (job.state_dir / HISTORY).write_bytes(history)
        if isinstance(output, DeferredToolRequests):
            return Outcome(status="DeferredToolRequests",
                           answer=", ".join(f"{c.tool_name}({c.args})" for c in output.approvals))
        return Outcome(status="returned", answer=str(output))

    async def run(self, job: Job) -> Outcome:
        return await self._go(job, job.task)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        history = ModelMessagesTypeAdapter.validate_json((job.state_dir / HISTORY).read_bytes())
        if decision is None:
            return await self._go(job, None, history)
        calls = [p for m in history for p in getattr(m, "parts", []) if p.part_kind == "tool-call"]
        verdict = True if isinstance(decision, Approve) else ToolDenied(decision.reason)
        gated = {p.tool_call_id: verdict for p in calls if p.tool_name in job.limits.needs_approval}
        return await self._go(job, None, history, DeferredToolResults(approvals=gated))


class PydanticAIModelRetry(PydanticAI):
    """The documented setting for tool errors: the tool raises `ModelRetry(str(error))`."""

    name = "pydantic-ai, ModelRetry(str(error))"
    retry_errors = True


class PydanticAITokenBudget(PydanticAI):
    """The budget as its token equivalent, `input_tokens_limit` ($ / $2 per million input tokens)."""

    name = "pydantic-ai, input_tokens_limit"

    def usage_limits(self, job: Job) -> UsageLimits:
        budget = job.limits.max_budget_usd
        return UsageLimits(request_limit=job.limits.max_turns,
                           input_tokens_limit=None if budget is None else round(budget / 2e-6))
