"""LlamaIndex (`llama-index-core` + `llama-index-llms-openai-like`) as an exitkit adapter, as its docs
write it: a `FunctionAgent` over `OpenAILike` pointed at the mock, each kit tool a `FunctionTool`
from its Python signature, `max_iterations` as the turn cap, approval as `ctx.wait_for_event(
HumanResponseEvent)` inside the gated tool, the workflow's `Context` saved with `to_dict` and
restored with `Context.from_dict` in a new process, and `handler.cancel_run()` for Stop. LlamaIndex
has no spending limit. More than 60 lines because it has no approval setting on a tool (the gated
tool waits for the person's event itself), no Stop hook (a task waits for the kit's and cancels the
run) and no "waiting for approval" result (the event stream is read until `InputRequiredEvent`).
"""

# No `from __future__ import annotations`: LlamaIndex finds the tool parameter that takes the run's
# `Context` by its annotation, read at run time.
import asyncio
import json
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent, JsonSerializer
from llama_index.llms.openai_like import OpenAILike

from exitkit import Approve, Decision, Job, Outcome, Tool

SAVED, APPROVE = "context.json", "approve"


def _tool(tool: Tool, gated: bool) -> FunctionTool:
    inner = tool.function()
    plain = FunctionTool.from_defaults(async_fn=inner)

    async def ask_first(ctx: Context, **arguments: Any) -> str:
        answer = await ctx.wait_for_event(HumanResponseEvent, waiter_id=tool.name,
                                          waiter_event=InputRequiredEvent(prefix=f"Run {tool.name}?"))
        if answer.response != APPROVE:
            return f"Rejected by the user: {answer.response}"
        return await inner(**arguments)

    # The model sees `inner`'s schema; LlamaIndex hands `ask_first` the run's context.
    return FunctionTool(async_fn=ask_first, metadata=plain.metadata) if gated else plain


class LlamaIndex:
    name = "LlamaIndex"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})

    async def _go(self, job: Job, saved: dict[str, Any] | None = None, reply: str | None = None) -> Outcome:
        llm = OpenAILike(model=job.model, api_base=job.base_url, api_key=job.api_key, is_chat_model=True,
                         is_function_calling_model=True, context_window=128_000)
        agent = FunctionAgent(llm=llm, system_prompt=job.system,
                              tools=[_tool(t, t.name in job.limits.needs_approval) for t in job.tools])
        start = {"user_msg": job.task} if saved is None else {
            "ctx": Context.from_dict(agent, saved, serializer=JsonSerializer())}
        handler = agent.run(**start, max_iterations=job.limits.max_turns or 50)
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
            (job.state_dir / SAVED).write_text(json.dumps(handler.ctx.to_dict(serializer=JsonSerializer())))
        if waiting:
            await handler.cancel_run()
            return Outcome(status="InputRequiredEvent")
        return Outcome(status="returned", answer=str(await handler))

    async def run(self, job: Job) -> Outcome:
        return await self._go(job)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        reply = None if decision is None else APPROVE if isinstance(decision, Approve) else decision.reason
        return await self._go(job, json.loads((job.state_dir / SAVED).read_text()), reply)
