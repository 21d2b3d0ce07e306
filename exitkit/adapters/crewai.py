"""CrewAI as an exitkit adapter, written as its docs write it.

One `Agent` in a `Crew` with one `Task`, its `LLM("openai/<model>", base_url=...)` pointed at the
mock, each kit tool a `@tool` built from a synchronous Python function (`job.blocking`: CrewAI
calls its tools synchronously, and `kickoff_async` runs the crew in a worker thread), and
`max_iter` as the turn cap. CrewAI has no spending limit, no approval of a tool call, no cancel
and no resume of a crew in a new process (`human_input` asks on the terminal after the task).
"""

from __future__ import annotations

import os

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # else it sends spans to CrewAI's servers
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.tools import tool  # noqa: E402

from exitkit import Job, Outcome  # noqa: E402


class CrewAI:
    name = "CrewAI"
    limits = frozenset({"max_turns"})

    async def run(self, job: Job) -> Outcome:
        llm = LLM(model=f"openai/{job.model}", base_url=job.base_url, api_key=job.api_key)
        tools = [tool(t.name)(job.blocking(t)) for t in job.tools]
        agent = Agent(role="files assistant", goal=job.system, backstory=job.system, llm=llm, tools=tools,
                      max_iter=job.limits.max_turns or 25, verbose=False)
        task = Task(description=job.task, expected_output="One short sentence.", agent=agent)
        result = await Crew(agents=[agent], tasks=[task], verbose=False).kickoff_async()
        return Outcome(status="kickoff returned", answer=str(result.raw))
