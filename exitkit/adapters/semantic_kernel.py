"""Semantic Kernel as an exitkit adapter, written as its docs write it.

A `ChatCompletionAgent` over `OpenAIChatCompletion` with an `AsyncOpenAI` client pointed at the
mock, the kit's tools as a `KernelPlugin` of `@kernel_function`s built from their Python
signatures, `FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=...)` as the turn cap and
the cancelled task for Stop (SK's documented way). Semantic Kernel has no spending limit, and its
approval (a function-invocation filter) cannot be resumed in a new process.
"""

from __future__ import annotations

import asyncio
import contextlib

from openai import AsyncOpenAI
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion, OpenAIChatPromptExecutionSettings
from semantic_kernel.functions import KernelArguments, KernelPlugin, kernel_function

from exitkit import Job, Outcome


class SemanticKernel:
    name = "Semantic Kernel"
    limits = frozenset({"max_turns", "cancel"})

    async def run(self, job: Job) -> Outcome:
        client = AsyncOpenAI(base_url=job.base_url, api_key=job.api_key)
        functions = [kernel_function(name=t.name, description=t.description)(t.function()) for t in job.tools]
        auto = FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=job.limits.max_turns or 50)
        agent = ChatCompletionAgent(service=OpenAIChatCompletion(ai_model_id=job.model, async_client=client),
                                    name="files", instructions=job.system,
                                    plugins=[KernelPlugin(name="files", functions=functions)],
                                    arguments=KernelArguments(OpenAIChatPromptExecutionSettings(
                                        function_choice_behavior=auto)))
        work = asyncio.ensure_future(agent.get_response(messages=job.task))
        stop = asyncio.ensure_future(job.cancel.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
            return Outcome(status="cancelled (task.cancel())")
        return Outcome(status="returned", answer=str(work.result().content))
