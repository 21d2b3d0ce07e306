"""A loop the kit has never seen, written from docs/exitkit.md alone: the `openai` SDK, streamed.

Streaming is how most chat UIs call the model; like most such loops it does not ask for usage.
"""

import json

from openai import AsyncOpenAI

from exitkit import Outcome


class StreamLoop:
    name = "streamed openai loop"
    limits = frozenset({"max_turns", "cancel"})

    async def run(self, job):
        schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}} for t in job.tools]
        messages = [{"role": "system", "content": job.system}, {"role": "user", "content": job.task}]
        async with AsyncOpenAI(base_url=job.base_url, api_key=job.api_key) as client:
            for _ in range(job.limits.max_turns or 50):
                text, calls = "", {}
                async for chunk in await client.chat.completions.create(
                        model=job.model, messages=messages, tools=schemas, stream=True):
                    delta = chunk.choices[0].delta if chunk.choices else None
                    text += (delta and delta.content) or ""
                    for part in (delta and delta.tool_calls) or []:
                        call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                        call["id"] += part.id or ""
                        call["name"] += part.function.name or ""
                        call["arguments"] += part.function.arguments or ""
                if not calls:
                    return Outcome(status="completed", answer=text)
                messages.append({"role": "assistant", "content": text or None, "tool_calls": [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls.values()]})
                for c in calls.values():
                    try:
                        tool, arguments = job.tool(c["name"]), json.loads(c["arguments"])
                        result = await job.unless_stopped(tool.call(**arguments))
                    except PermissionError:
                        raise
                    except Exception as error:
                        result = f"Error: {error}"
                    if result is None:
                        return Outcome(status="cancelled")
                    messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
        return Outcome(status="max_turns")
