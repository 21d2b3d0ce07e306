"""AutoGen (`autogen-agentchat` + `autogen-ext[openai]`) as an exitkit adapter, as its docs write it.

An `AssistantAgent` over `OpenAIChatCompletionClient`, each kit tool a `FunctionTool` built from
its Python signature, `max_tool_iterations` as the turn cap, a `CancellationToken` for Stop, and
`save_state()` / `load_state()` to go on in a new process. AutoGen has no spending limit and no
approval for an `AssistantAgent`'s tools (`UserProxyAgent` asks a person on the terminal).
"""

from __future__ import annotations

import asyncio
import json

from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.tools import FunctionTool
from autogen_ext.models.openai import OpenAIChatCompletionClient

from exitkit import Decision, Job, Outcome

INFO = {"vision": False, "function_calling": True, "json_output": False, "structured_output": False,
        "family": "unknown"}


class AutoGen:
    name = "AutoGen"
    limits = frozenset({"max_turns", "cancel", "resume"})

    async def _go(self, job: Job, task: str | None, state: dict | None = None) -> Outcome:
        client = OpenAIChatCompletionClient(model=job.model, base_url=job.base_url, api_key=job.api_key,
                                            model_info=INFO)
        tools = [FunctionTool(t.function(), description=t.description) for t in job.tools]
        agent = AssistantAgent("files", model_client=client, system_message=job.system, tools=tools,
                               max_tool_iterations=job.limits.max_turns or 50)
        if state is not None:
            await agent.load_state(state)
        token = CancellationToken()
        watcher = asyncio.ensure_future(job.cancel.wait())
        watcher.add_done_callback(lambda _: token.cancel())
        try:
            result = await agent.run(task=task, cancellation_token=token)
        finally:
            watcher.cancel()
            (job.state_dir / "state.json").write_text(json.dumps(await agent.save_state(), default=str))
            await client.close()
        last = result.messages[-1]
        return Outcome(status=f"stop_reason={result.stop_reason}", answer=str(last.content),
                       transcript_messages=len(result.messages))

    async def run(self, job: Job) -> Outcome:
        return await self._go(job, job.task)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        return await self._go(job, None, json.loads((job.state_dir / "state.json").read_text()))
