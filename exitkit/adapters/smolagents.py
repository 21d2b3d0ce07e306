"""smolagents as an exitkit adapter, written as its docs write it.

A `ToolCallingAgent` over `OpenAIModel` pointed at the mock, each kit tool a `@tool` built from a
synchronous Python function (`job.blocking`: smolagents calls its tools synchronously, so its
`run` goes to a worker thread), `max_steps` as the turn cap and `agent.interrupt()` for Stop.
smolagents has no spending limit, no approval and no resume in a new process.
"""

from __future__ import annotations

import asyncio

from smolagents import OpenAIModel, ToolCallingAgent, tool

from exitkit import Job, Outcome


class Smolagents:
    name = "smolagents"
    limits = frozenset({"max_turns", "cancel"})

    async def run(self, job: Job) -> Outcome:
        model = OpenAIModel(model_id=job.model, api_base=job.base_url, api_key=job.api_key)
        tools = [tool(job.blocking(t)) for t in job.tools]
        agent = ToolCallingAgent(tools=tools, model=model, instructions=job.system, verbosity_level=0,
                                 max_steps=job.limits.max_turns or 20)
        watcher = asyncio.ensure_future(job.cancel.wait())
        watcher.add_done_callback(lambda _: agent.interrupt())
        try:
            result = await asyncio.to_thread(agent.run, job.task, return_full_result=True)
        finally:
            watcher.cancel()
        return Outcome(status=result.state, answer=str(result.output),
                       transcript_messages=len(result.steps))
