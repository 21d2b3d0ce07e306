"""LlamaIndex (`llama-index-core` + `llama-index-llms-openai-like`) as an exitkit adapter, as its docs
write it.

A `FunctionAgent` over `OpenAILike` pointed at the mock, each kit tool a `FunctionTool` from its
Python signature, `max_iterations` as the turn cap, approval as `ctx.wait_for_event(
HumanResponseEvent)` inside the gated tool, the workflow's `Context` saved with
`ctx.to_dict(serializer=JsonSerializer())` and restored with `Context.from_dict` in a new process,
and `handler.cancel_run()` for Stop. LlamaIndex has no spending limit.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent, JsonSerializer
from llama_index.llms.openai_like import OpenAILike

from exitkit import Approve, Decision, Job, Outcome
from exitkit import Tool as KitTool

SAVED, APPROVE = "context.json", "approve"


def _gated(tool: KitTool) -> Any:
    inner = tool.function()

    async def gated(ctx: Context, **arguments: Any) -> str:
        answer = await ctx.wait_for_event(HumanResponseEvent, waiter_id=tool.name,
                                          waiter_event=InputRequiredEvent(prefix=f"Run {tool.name}?"))
        if answer.response != APPROVE:
            return f"Rejected by the user: {answer.response}"
        return await inner(**arguments)

    signature = inspect.signature(inner)
    ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
    gated.__signature__ = signature.replace(parameters=[ctx, *signature.parameters.values()])  # type: ignore[attr-defined]
    gated.__name__, gated.__doc__ = inner.__name__, inner.__doc__
    gated.__annotations__ = {"ctx": Context, **inner.__annotations__}
    return gated


class LlamaIndex:
    name = "LlamaIndex"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})

    async def _go(self, job: Job, handler: Any, reply: str | None = None) -> Outcome:
        if reply is not None:
            handler.ctx.send_event(HumanResponseEvent(response=reply))

        async def press() -> None:
            await job.cancel.wait()
            await handler.cancel_run()

        watcher, waiting = asyncio.ensure_future(press()), False
        try:
            async for event in handler.stream_events():
                if waiting := isinstance(event, InputRequiredEvent):
                    break
        finally:
            watcher.cancel()
            data = handler.ctx.to_dict(serializer=JsonSerializer())
            (job.state_dir / SAVED).write_text(json.dumps(data))
        if waiting:
            await handler.cancel_run()
            return Outcome(status="InputRequiredEvent")
        return Outcome(status="returned", answer=str(await handler))

    def _agent(self, job: Job) -> FunctionAgent:
        llm = OpenAILike(model=job.model, api_base=job.base_url, api_key=job.api_key, is_chat_model=True,
                         is_function_calling_model=True, context_window=128_000)
        tools = [FunctionTool.from_defaults(async_fn=_gated(t) if t.name in job.limits.needs_approval
                                            else t.function()) for t in job.tools]
        return FunctionAgent(llm=llm, tools=tools, system_prompt=job.system)

    async def run(self, job: Job) -> Outcome:
        handler = self._agent(job).run(user_msg=job.task, max_iterations=job.limits.max_turns or 50)
        return await self._go(job, handler)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        agent = self._agent(job)
        data = json.loads((job.state_dir / SAVED).read_text())
        ctx = Context.from_dict(agent, data, serializer=JsonSerializer())
        handler = agent.run(ctx=ctx, max_iterations=job.limits.max_turns or 50)
        reply = None if decision is None else APPROVE if isinstance(decision, Approve) else decision.reason
        return await self._go(job, handler, reply)
