"""An agent the kit has never seen, written from docs/exitkit.md alone: bare httpx, a JSON file."""

import json

import httpx

from exitkit import Outcome, Reject


def first_run(job, name):
    """True in the first run of this kit only: every run is a process of its own, and its folder
    is one of the kit's (`<kit's folder>/run-N-scenario/state`)."""
    marker = job.state_dir.parent.parent / f"first-run-{name}"
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


class FileLoop:
    name = "file loop"
    limits = frozenset({"max_turns", "approval", "cancel", "resume"})

    async def run(self, job):
        messages = [{"role": "system", "content": job.system}, {"role": "user", "content": job.task}]
        return await self.go(job, messages)

    async def resume(self, job, decision):
        return await self.go(job, json.loads((job.state_dir / "messages.json").read_text()), decision)

    def save(self, job, messages):
        (job.state_dir / "messages.json").write_text(json.dumps(messages))

    async def call(self, job, fn, intent):  # the tool's text, or None when Stop was pressed
        intent.write_text(fn["name"]) if intent else None  # a write under way: a crash leaves it behind
        try:
            return await job.unless_stopped(job.tool(fn["name"]).call(**json.loads(fn["arguments"])))
        except PermissionError:  # retrying cannot help: end the run
            raise
        except Exception as error:
            return f"Error: {error}"

    async def go(self, job, messages, decision=None):
        schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}} for t in job.tools]
        intent = job.state_dir / "intent"
        async with httpx.AsyncClient(base_url=job.base_url, timeout=30) as http:
            while True:
                answered = {m.get("tool_call_id") for m in messages}
                for call in [c for c in messages[-1].get("tool_calls") or [] if c["id"] not in answered]:
                    gated = call["function"]["name"] in job.limits.needs_approval
                    if gated and (decision is None or intent.exists()):
                        self.save(job, messages)
                        return Outcome(status="in doubt" if intent.exists() else "approval")
                    if isinstance(decision, Reject):
                        result = f"Rejected by the user: {decision.reason}"
                    elif (result := await self.call(job, call["function"], gated and intent)) is None:
                        return Outcome(status="cancelled")
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                    self.save(job, messages)
                    intent.unlink(missing_ok=True)
                if sum(m["role"] == "assistant" for m in messages) >= (job.limits.max_turns or 50):
                    return Outcome(status="max_turns")
                reply = await http.post("/chat/completions", json={"model": job.model, "messages": messages,
                                                                   "tools": schemas})
                messages.append(reply.raise_for_status().json()["choices"][0]["message"])
                self.save(job, messages)
                if not messages[-1].get("tool_calls"):
                    return Outcome(status="completed", answer=messages[-1]["content"])


class _OwnIds(list):
    def append(self, message):
        for call in message.get("tool_calls") or []:
            call["id"] = call["id"] if call["id"].startswith("own-") else f"own-{call['id']}"
        super().append(message)


class OwnIds(FileLoop):
    """The same loop, naming each tool call with an id of its own (as some frameworks do)."""

    name = "file loop, own call ids"

    async def go(self, job, messages, decision=None):
        renamed = _OwnIds()
        for message in messages:
            renamed.append(message)
        return await super().go(job, renamed, decision)
