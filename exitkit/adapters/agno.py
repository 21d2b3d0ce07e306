"""Agno as an exitkit adapter, written as its docs write it.

An `Agent` over `OpenAIChat` pointed at the mock, each kit tool a Python function (gated ones with
`@tool(requires_confirmation=True)`), `tool_call_limit` as the turn cap, a `JsonDb` in the job's
state folder so a paused run is continued in a new process with `acontinue_run(run_id=...)`
after `requirement.confirm()` / `requirement.reject(note)`, and `acancel_run(run_id)` for Stop.
Agno has no spending limit.
"""

from __future__ import annotations

import asyncio

from agno.agent import Agent
from agno.db.json import JsonDb
from agno.models.openai import OpenAIChat
from agno.tools import tool as agno_tool

from exitkit import Approve, Decision, Job, Outcome

SESSION, RUN = "exitkit", "exitkit-run"


def _agent(job: Job) -> Agent:
    tools = [agno_tool(requires_confirmation=True)(t.function()) if t.name in job.limits.needs_approval
             else t.function() for t in job.tools]
    return Agent(model=OpenAIChat(id=job.model, base_url=job.base_url, api_key=job.api_key),
                 instructions=job.system, tools=tools, tool_call_limit=job.limits.max_turns,
                 db=JsonDb(db_path=str(job.state_dir / "agno")), session_id=SESSION)


class Agno:
    name = "Agno"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})

    async def _watch(self, job: Job, work: object) -> Outcome:
        async def press() -> None:
            await job.cancel.wait()
            await Agent.acancel_run(RUN)

        watcher = asyncio.ensure_future(press())
        try:
            out = await work  # type: ignore[misc]
        finally:
            watcher.cancel()
        status = "paused" if out.is_paused else str(out.status)
        return Outcome(status=status, answer=str(out.content or ""),
                       transcript_messages=len(out.messages or []))

    async def run(self, job: Job) -> Outcome:
        return await self._watch(job, _agent(job).arun(job.task, run_id=RUN, session_id=SESSION))

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        agent = _agent(job)
        paused = await agent.aget_run_output(RUN, session_id=SESSION)
        for requirement in paused.active_requirements if paused else []:
            if isinstance(decision, Approve):
                requirement.confirm()
            elif decision is not None:
                requirement.reject(note=decision.reason)
        requirements = paused.requirements if paused else None
        return await self._watch(job, agent.acontinue_run(run_id=RUN, requirements=requirements,
                                                          session_id=SESSION))
