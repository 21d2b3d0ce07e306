"""The plain `openai` loop with the kit's tools over MCP: listed and called with the `mcp` SDK's `Client`."""

import json

from mcp import Client
from openai import AsyncOpenAI

from exitkit import Outcome


class PlainLoopOverMCP:
    name = "plain openai loop, tools over MCP"
    limits = frozenset({"max_turns", "cancel"})
    tools = "mcp"  # the kit serves job.tools at job.mcp_url

    async def run(self, job):
        messages = [{"role": "system", "content": job.system}, {"role": "user", "content": job.task}]
        async with (AsyncOpenAI(base_url=job.base_url, api_key=job.api_key) as client,
                    Client(job.mcp_url) as mcp):
            schemas = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                         "parameters": t.input_schema}}
                       for t in (await mcp.list_tools()).tools]
            for _ in range(job.limits.max_turns or 50):
                reply = await client.chat.completions.create(model=job.model, messages=messages,
                                                             tools=schemas)
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    return Outcome(status="completed", answer=message.content or "",
                                   transcript_messages=len(messages))
                for call in message.tool_calls:
                    arguments = json.loads(call.function.arguments)
                    result = await job.unless_stopped(mcp.call_tool(call.function.name, arguments))
                    if result is None:  # Stop was pressed: the call was cancelled
                        return Outcome(status="cancelled", transcript_messages=len(messages))
                    text = "\n".join(block.text for block in result.content if block.type == "text")
                    # an isError result is the tool's error sentence: data for the model, as in `plain`
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": f"Error: {text}" if result.is_error else text})
        return Outcome(status="max_turns", transcript_messages=len(messages))
