"""The worked example: a plain `openai` SDK loop as an exitkit adapter (see docs/exitkit.md)."""

import json

from openai import AsyncOpenAI

from exitkit import Outcome


class PlainLoop:
    name = "plain openai loop"
    limits = frozenset({"max_turns", "cancel"})  # no budget, approvals or resume: the report says so

    async def run(self, job):
        schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}} for t in job.tools]
        messages = [{"role": "system", "content": job.system}, {"role": "user", "content": job.task}]
        async with AsyncOpenAI(base_url=job.base_url, api_key=job.api_key) as client:
            for _ in range(job.limits.max_turns or 50):
                reply = await client.chat.completions.create(model=job.model, messages=messages,
                                                             tools=schemas)
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    return Outcome(status="completed", answer=message.content or "",
                                   transcript_messages=len(messages))
                for call in message.tool_calls:
                    tool = job.tool(call.function.name)
                    try:
                        result = await job.unless_stopped(tool.call(**json.loads(call.function.arguments)))
                    except PermissionError:  # retrying cannot help: end the run with the reason
                        raise
                    except Exception as error:  # any other tool error is data: tell the model what failed
                        result = f"Error: {error}"
                    if result is None:  # Stop was pressed: the tool was cancelled
                        return Outcome(status="cancelled", transcript_messages=len(messages))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return Outcome(status="max_turns", transcript_messages=len(messages))
