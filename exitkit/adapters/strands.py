"""Strands Agents as an exitkit adapter, written as its docs write it.

An `Agent` over `OpenAIModel` pointed at the mock, each kit tool a `@tool` from its Python
signature, approval as an interrupt raised in a `BeforeToolCallEvent` hook and answered with an
`interruptResponse`, a `FileSessionManager` in the job's state folder so a new process resumes
the session, and `agent.cancel()` for Stop. Strands has no turn cap and no spending limit.
"""

from __future__ import annotations

import asyncio
import json

from strands import Agent, tool
from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
from strands.models.openai import OpenAIModel
from strands.session.file_session_manager import FileSessionManager

from exitkit import Approve, Decision, Job, Outcome

APPROVE = "approve"


class _Gate(HookProvider):
    def __init__(self, gated: frozenset[str]) -> None:
        self.gated = gated

    def register_hooks(self, registry: HookRegistry, **kwargs: object) -> None:
        registry.add_callback(BeforeToolCallEvent, self.ask)

    def ask(self, event: BeforeToolCallEvent) -> None:
        if event.tool_use["name"] in self.gated:
            answer = event.interrupt("approval", reason={"tool": event.tool_use["name"]})
            if answer != APPROVE:
                event.cancel_tool = f"Rejected by the user: {answer}"


class Strands:
    name = "Strands Agents"
    limits = frozenset({"approval", "cancel", "resume"})

    async def _go(self, job: Job, prompt: object) -> Outcome:
        model = OpenAIModel(client_args={"base_url": job.base_url, "api_key": job.api_key},
                            model_id=job.model)
        sessions = FileSessionManager(session_id="exitkit", storage_dir=str(job.state_dir))
        agent = Agent(model=model, system_prompt=job.system, tools=[tool(t.function()) for t in job.tools],
                      hooks=[_Gate(job.limits.needs_approval)], callback_handler=None,
                      session_manager=sessions)
        watcher = asyncio.ensure_future(job.cancel.wait())
        watcher.add_done_callback(lambda _: agent.cancel())
        try:
            result = await agent.invoke_async(prompt)
        finally:
            watcher.cancel()
        (job.state_dir / "interrupts.json").write_text(json.dumps([i.id for i in result.interrupts or []]))
        return Outcome(status=str(result.stop_reason), answer=str(result))

    async def run(self, job: Job) -> Outcome:
        return await self._go(job, job.task)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        ids = json.loads((job.state_dir / "interrupts.json").read_text())
        if decision is None or not ids:
            return await self._go(job, None)
        answer = APPROVE if isinstance(decision, Approve) else decision.reason
        responses = [{"interruptResponse": {"interruptId": i, "response": answer}} for i in ids]
        return await self._go(job, responses)
