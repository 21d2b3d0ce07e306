"""A command agent, as one in another language would be written from docs/exitkit.md alone: it
reads only the environment and the job file, asks the model with bare httpx and calls the tools
with the `mcp` SDK's client (no exitkit import). `python file_agent.py [BROKEN]`: BROKEN names one
way a real agent goes wrong (see BROKEN below); the kit must fail exactly that case.
"""

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx

BROKEN = {"": "file agent, a command",
          "ignores-cap": "command agent that ignores the cap",
          "reruns-effect": "command agent that re-runs the effect",
          "dangles": "command agent that leaves a dangling call"}
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
PERMANENT = "permission denied"


def say(outcome):
    print(json.dumps(outcome), flush=True)


class Agent:
    def __init__(self, job):
        self.job, self.state = job, Path(job["state_dir"])
        self.saved, self.intent = self.state / "messages.json", self.state / "intent"
        self.stop, self.spent = asyncio.Event(), 0.0
        self.saves = not (MODE == "reruns-effect" and job["action"] == "resume")

    def save(self, messages):
        if self.saves:
            self.saved.write_text(json.dumps(messages))

    async def unless_stopped(self, work):
        """`work`'s result, or None when Stop came first (then `work` is cancelled: over MCP, the
        client sends notifications/cancelled)."""
        task, stop = asyncio.ensure_future(work), asyncio.ensure_future(self.stop.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        return None

    async def call(self, tools, call):
        result = await self.unless_stopped(tools.call_tool(call["function"]["name"],
                                                           json.loads(call["function"]["arguments"] or "{}")))
        if result is None:
            return None, False
        text = "\n".join(block.text for block in result.content if block.type == "text")
        return (f"Error: {text}" if result.is_error else text), result.is_error and PERMANENT in text

    def over_budget(self):
        budget = self.job["limits"]["max_budget_usd"]
        return budget is not None and self.spent >= budget

    def bill(self, usage):
        prices = self.job["prices"]
        self.spent += (usage["prompt_tokens"] * prices["input_usd_per_m"]
                       + usage["completion_tokens"] * prices["output_usd_per_m"]) / 1e6

    async def go(self, http, tools, messages, decision):
        job = self.job
        cap = job["limits"]["max_turns"] if MODE != "ignores-cap" else None
        schemas = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                     "parameters": t["parameters"]}} for t in job["tools"]]
        while True:
            answered = {m.get("tool_call_id") for m in messages}
            pending = [c for c in messages[-1].get("tool_calls") or [] if c["id"] not in answered]
            if MODE == "dangles" and job["action"] == "resume" and decision is None:
                pending = []  # a call Stop interrupted is never answered
            for call in pending:
                gated = call["function"]["name"] in job["limits"]["needs_approval"]
                if gated and (decision is None or self.intent.exists()):
                    self.save(messages)
                    return {"status": "in doubt" if self.intent.exists() else "awaiting_approval"}
                if decision is not None and "reject" in decision:
                    result, permanent = f"Rejected by the user: {decision['reject']}", False
                else:
                    if gated:  # a write under way: a crash leaves it behind
                        self.intent.write_text(call["function"]["name"])
                    result, permanent = await self.call(tools, call)
                    if result is None:
                        return {"status": "cancelled", "transcript_messages": len(messages)}
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                self.save(messages)
                self.intent.unlink(missing_ok=True)
                if permanent:  # retrying cannot help: end the run with the reason
                    return {"status": "failed", "error": result}
            if cap is not None and sum(m["role"] == "assistant" for m in messages) >= cap:
                return {"status": "max_turns", "transcript_messages": len(messages)}
            if self.over_budget():
                return {"status": "max_budget", "transcript_messages": len(messages)}
            reply = await self.unless_stopped(http.post("chat/completions", json={
                "model": job["model"], "messages": messages, "tools": schemas}))
            if reply is None:
                return {"status": "cancelled", "transcript_messages": len(messages)}
            body = reply.raise_for_status().json()
            self.bill(body["usage"])
            messages.append(body["choices"][0]["message"])
            self.save(messages)
            if not messages[-1].get("tool_calls"):
                return {"status": "completed", "answer": messages[-1]["content"],
                        "transcript_messages": len(messages)}


async def main(job):
    from mcp import Client

    agent = Agent(job)
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, agent.stop.set)
    messages = [{"role": "system", "content": job["system"]}, {"role": "user", "content": job["task"]}]
    if job["action"] == "resume":
        messages = json.loads(agent.saved.read_bytes())
    base = job["base_url"].rstrip("/") + "/"
    async with httpx.AsyncClient(base_url=base, timeout=30) as http, Client(job["mcp_url"]) as tools:
        return await agent.go(http, tools, messages, job["decision"])


if __name__ == "__main__":
    if os.environ["EXITKIT_ACTION"] == "describe":
        say({"name": BROKEN[MODE], "limits": ["max_turns", "max_budget_usd", "approval", "cancel", "resume"]})
    else:
        say(asyncio.run(main(json.loads(Path(os.environ["EXITKIT_JOB"]).read_text()))))
        # The interpreter's own teardown (the MCP SDK's modules) takes most of a second: Stop is
        # timed to the process's end.
        os._exit(0)
