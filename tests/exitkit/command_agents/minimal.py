import asyncio
import json
import os
import signal

import httpx
from mcp import Client

if os.environ["EXITKIT_ACTION"] == "describe":
    print(json.dumps({"name": "minimal command agent", "limits": ["max_turns", "cancel"]}))
    raise SystemExit(0)
with open(os.environ["EXITKIT_JOB"]) as f:
    job = json.load(f)


async def main() -> dict:
    stop = asyncio.Event()  # Stop is SIGINT to the process group
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    schemas = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
               for t in job["tools"]]
    messages = [{"role": "system", "content": job["system"]}, {"role": "user", "content": job["task"]}]
    async with httpx.AsyncClient(timeout=60) as http, Client(job["mcp_url"]) as tools:
        for _ in range(job["limits"]["max_turns"] or 50):
            reply = await http.post(job["base_url"] + "/chat/completions",
                                    json={"model": job["model"], "messages": messages, "tools": schemas})
            message = reply.raise_for_status().json()["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                return {"status": "completed", "answer": message["content"],
                        "transcript_messages": len(messages)}
            for call in message["tool_calls"]:
                fn = call["function"]
                task = asyncio.ensure_future(tools.call_tool(fn["name"], json.loads(fn["arguments"] or "{}")))
                await asyncio.wait({task, asyncio.ensure_future(stop.wait())},
                                   return_when=asyncio.FIRST_COMPLETED)
                if not task.done():  # cancelling the call sends notifications/cancelled to the kit
                    task.cancel()
                    return {"status": "cancelled", "transcript_messages": len(messages)}
                result = task.result()
                text = "\n".join(c.text for c in result.content if c.type == "text")
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": f"Error: {text}" if result.is_error else text})
    return {"status": "max_turns", "transcript_messages": len(messages)}


print(json.dumps(asyncio.run(main())), flush=True)
os._exit(0)  # the outcome is out: skip the interpreter's teardown (Stop is timed to the process's end)
