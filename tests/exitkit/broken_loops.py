"""The file loop, each broken in one way a real agent is: the kit must fail exactly that case."""

from file_loop import FileLoop, first_run


class IgnoresCap(FileLoop):
    """Told a turn cap, runs on as if it had none."""

    name = "ignores the cap"

    async def run(self, job):
        from dataclasses import replace

        return await super().run(replace(job, limits=replace(job.limits, max_turns=10_000)))


class ReRunsEffect(FileLoop):
    """Never saves after a resume: a second resume of the same state runs the approved call again."""

    name = "re-runs the effect"

    async def resume(self, job, decision):
        self.save = lambda job, messages: None
        return await super().resume(job, decision)


class SwallowsErrors(FileLoop):
    """Turns every tool error into an empty result, so the model never learns what failed."""

    name = "swallows tool errors"

    async def call(self, job, fn, intent):
        try:
            result = await super().call(job, fn, intent)
        except Exception:
            return ""
        return "" if result and result.startswith("Error: ") else result


class ResponsesLoop(FileLoop):
    """Talks the Responses API to the same mock, and ignores the turn cap past 12 requests."""

    name = "responses loop"

    async def run(self, job):
        import httpx

        async with httpx.AsyncClient(base_url=job.base_url, timeout=30) as http:
            for _ in range(12):
                reply = await http.post("/responses", json={"model": job.model, "input": job.task})
                reply.raise_for_status()
        from exitkit import Outcome

        return Outcome(status="max_turns")


class RunsOnAfterStop(FileLoop):
    """Cancels the tool on Stop, then tells the model it failed and carries on to an answer."""

    name = "runs on after Stop"

    async def call(self, job, fn, intent):
        result = await super().call(job, fn, intent)
        return "Error: the tool was cancelled." if result is None else result



class GivesUpUnseen(FileLoop):
    """Says "permission denied" without ever asking the model or running a tool."""

    name = "gives up unseen"

    async def run(self, job):
        raise PermissionError("permission denied")



class KeepsStateInTheEnvironment(FileLoop):
    """Saves its state in os.environ instead of job.state_dir: it survives no new process."""

    name = "keeps its state in the environment"

    def save(self, job, messages):
        import json
        import os

        os.environ["EXITKIT_TEST_STATE"] = json.dumps(messages)

    async def resume(self, job, decision):
        import json
        import os

        return await self.go(job, json.loads(os.environ["EXITKIT_TEST_STATE"]), decision)


class LeavesItRunning(FileLoop):
    """Starts a background worker on its first run that outlives the run and keeps asking the model."""

    name = "leaves it running"

    async def run(self, job):
        import asyncio

        import httpx

        async def worker():
            async with httpx.AsyncClient(base_url=job.base_url, timeout=30) as http:
                for _ in range(50):
                    await http.post("/chat/completions", json={"model": job.model, "messages": [
                        {"role": "user", "content": job.task}]})
                    await asyncio.sleep(0.1)

        if first_run(job, "leaves-it-running"):
            asyncio.ensure_future(worker())
        return await super().run(job)


class CapOffByOne(FileLoop):
    """Counts its turns from zero and lets one more request through than the cap allows."""

    name = "cap off by one"
    by = 1

    async def run(self, job):
        from dataclasses import replace

        limits = replace(job.limits, max_turns=job.limits.max_turns + self.by)
        return await super().run(replace(job, limits=limits))


class CapOneShort(CapOffByOne):
    name = "cap one short"
    by = -1


class PartReason(FileLoop):
    """Passes the model only the first words of a rejection's reason."""

    name = "passes part of the reason"

    async def resume(self, job, decision):
        from exitkit import Reject

        if isinstance(decision, Reject):
            decision = Reject(decision.reason[:12])
        return await super().resume(job, decision)


class ForgetsTheCrash(FileLoop):
    """Saves only after a tool returns: a crash between the effect and the save re-runs it."""

    name = "forgets the crash"

    async def call(self, job, fn, intent):
        return await super().call(job, fn, None)


class SlowToStop(FileLoop):
    """Cancels the tool at Stop, then takes longer to wind down than the tool had left to run."""

    name = "slow to stop"

    async def call(self, job, fn, intent):
        import asyncio

        result = await super().call(job, fn, intent)
        if result is None:
            await asyncio.sleep(2.5)
        return result


class GivesUpAfterACrash(FileLoop):
    """Does not re-run the effect after a crash, but neither finishes nor says the call is in doubt."""

    name = "gives up after a crash"

    async def resume(self, job, decision):
        if (job.state_dir / "intent").exists():
            raise RuntimeError("the saved run cannot be read")
        return await super().resume(job, decision)


class SaysWhereItRuns(FileLoop):
    """Resumes by saying which process it runs in, and what environment it found."""

    name = "says where it runs"

    async def resume(self, job, decision):
        import os
        import sys

        from exitkit import Outcome

        late = os.environ.get("EXITKIT_TEST_LATE")
        return Outcome(status="here", answer=f"{os.getpid()} {sys.argv[0]} {late}")


class StopIsTheEnd(FileLoop):
    """Treats Stop as the end of the run: a resume after it has nothing to continue."""

    name = "Stop is the end"

    async def resume(self, job, decision):
        from exitkit import Outcome

        if decision is None:
            return Outcome(status="nothing to resume")
        return await super().resume(job, decision)


class AsksOnTheTerminal(FileLoop):
    """Asks for approval on stdin, as command-line agents do, when resumed."""

    name = "asks on the terminal"

    async def resume(self, job, decision):
        import sys

        from exitkit import Outcome

        return Outcome(status="asked", answer=repr(sys.stdin.readline()))


class SlowToStart(FileLoop):
    """Takes two seconds before its first request, as a framework that loads a lot on first use."""

    name = "slow to start"

    async def run(self, job):
        import asyncio

        await asyncio.sleep(2)
        return await super().run(job)


class ErrorAsUserText(FileLoop):
    """Sends a tool's result back as user text, the call as assistant text (as smolagents does)."""

    name = "error as user text"

    async def go(self, job, messages, decision=None):
        import httpx

        from exitkit import Outcome

        schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                     "parameters": t.parameters}} for t in job.tools]
        async with httpx.AsyncClient(base_url=job.base_url, timeout=30) as http:
            for _ in range(job.limits.max_turns or 50):
                reply = await http.post("/chat/completions", json={"model": job.model, "messages": messages,
                                                                   "tools": schemas})
                message = reply.raise_for_status().json()["choices"][0]["message"]
                if not message.get("tool_calls"):
                    return Outcome(status="completed", answer=message["content"])
                for call in message["tool_calls"]:
                    messages.append({"role": "assistant", "content": f"Calling tools: {call['function']}"})
                    try:
                        result = await self.call(job, call["function"], None)
                    except Exception as error:
                        result = f"Error: {error}"
                    messages.append({"role": "user", "content": f"Observation: {result}"})
        return Outcome(status="max_turns")


class NeverDeletes(FileLoop):
    """Declares approval and resume, and raises before its first request, in every process."""

    name = "never deletes"

    async def run(self, job):
        raise RuntimeError("the agent broke before its first request")

    async def resume(self, job, decision):
        raise RuntimeError("the agent broke before its first request")


class OneOverLastPending(CapOffByOne):
    """Sends one request past its cap and leaves that last reply's call unrun; no resume."""

    name = "one over, last pending"
    limits = frozenset({"max_turns"})

    ran = 0

    async def call(self, job, fn, intent):
        if self.ran == job.limits.max_turns - 1:  # the cap as this loop counts it, one past the job's
            return None  # ends the run the way Stop does: the call never runs
        self.ran += 1
        return await super().call(job, fn, intent)


class HangsAfterStop(FileLoop):
    """Cancels the tool at Stop, then never returns to its caller."""

    name = "hangs after Stop"

    async def call(self, job, fn, intent):
        import asyncio

        result = await super().call(job, fn, intent)
        if result is None:
            await asyncio.Event().wait()
        return result
