"""Agents written to fool the kit: each one is wrong in a way the kit must see."""

import threading
import time
from dataclasses import replace

import httpx
from broken_loops import SwallowsErrors
from file_loop import FileLoop, first_run

from exitkit import Outcome


class RaisesAtOnce:
    """Declares a budget and a turn cap, and raises before it ever asks the model."""

    name = "raises at once"
    limits = frozenset({"max_turns", "max_budget_usd"})

    async def run(self, job):
        raise RuntimeError("the agent broke before its first request")


class OwnModel(FileLoop):
    """Asks the mock for a model of its own choosing, not the one the kit handed it."""

    name = "own model"

    async def run(self, job):
        return await super().run(replace(job, model="plan"))


class OwnPath(FileLoop):
    """Sends its requests under an options prefix of its own, which picks another scenario."""

    name = "own path"

    async def run(self, job):
        return await super().run(replace(job, base_url=job.base_url.replace("/v1", "/o/scenario=plan/v1")))


class LeavesAThread(FileLoop):
    """Starts a thread on its first run that keeps asking the model after the run returned."""

    name = "leaves a thread"

    async def run(self, job):
        import asyncio

        asking = threading.Event()

        def worker():
            with httpx.Client(base_url=job.base_url, timeout=30) as http:
                end = time.monotonic() + 3
                while time.monotonic() < end:
                    try:
                        http.post("/chat/completions", json={"model": job.model, "messages": [
                            {"role": "user", "content": job.task}]})
                    except httpx.HTTPError:  # the kit's mock is gone: the card is over
                        return
                    asking.set()
                    time.sleep(0.05)  # a poller, not a flood: the run's own requests must get through

        if first_run(job, "leaves-a-thread"):
            threading.Thread(target=worker, daemon=True).start()
            await asyncio.to_thread(asking.wait, 10)
        return await super().run(job)


class NeverReturns(FileLoop):
    """Waits for ever without blocking the event loop."""

    name = "never returns"

    async def run(self, job):
        import asyncio

        await asyncio.Event().wait()


class BlocksForever(FileLoop):
    """Blocks the event loop for ever (a synchronous call inside async code)."""

    name = "blocks forever"

    async def run(self, job):
        threading.Event().wait()


class Named(FileLoop):
    """A name that carries terminal control sequences."""

    name = "evil\x1b[2J\x1b]0;pwned\x07\rname"


class NeedsArguments(FileLoop):
    """A class the kit cannot make with no arguments."""

    def __init__(self, api_key):
        self.api_key = api_key


class BrokenLimits:
    """`limits` is a property that raises when read."""

    name = "broken limits"

    @property
    def limits(self):
        raise KeyError("LIMITS")

    async def run(self, job):
        return Outcome(status="completed")


class RetriesSynchronously(FileLoop):
    """Retries its first request for ever with a synchronous client, so the event loop never runs."""

    name = "retries synchronously"

    async def run(self, job):
        with httpx.Client(base_url=job.base_url, timeout=30) as http:
            while True:
                http.post("/chat/completions", json={"model": job.model, "messages": [  # noqa: ASYNC212 on purpose
                    {"role": "user", "content": job.task}]})


class RetriesTheToolForever(FileLoop):
    """Retries a failing tool call at once, for ever, without asking the model again."""

    name = "retries the tool for ever"

    async def call(self, job, fn, intent):
        while True:
            try:
                return await super().call(job, fn, intent)
            except PermissionError:
                continue


class HangsAtTheCap(FileLoop):
    """Holds its turn cap, then never hands anything back to its caller."""

    name = "hangs at the cap"

    async def run(self, job):
        import asyncio

        await super().run(job)
        await asyncio.Event().wait()


class DanglesAfterStop(FileLoop):
    """Resumes after Stop by asking the model at once, the cancelled call left without its result."""

    name = "dangles after Stop"

    async def resume(self, job, decision):
        import json

        messages = json.loads((job.state_dir / "messages.json").read_text())
        async with httpx.AsyncClient(base_url=job.base_url, timeout=30) as http:
            reply = await http.post("/chat/completions", json={"model": job.model, "messages": messages})
        return Outcome(status=f"asked: {reply.status_code}", answer="The scan is complete.")


class SlowToCancel(FileLoop):
    """Never returns on its own, and takes its time winding down when cancelled."""

    name = "slow to cancel"

    async def run(self, job):
        import asyncio

        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(asyncio.sleep(8))


class CachesErrors(FileLoop):
    """Runs a failing call once, then answers every identical call from its cache, until its cap."""

    name = "caches errors"

    async def run(self, job):
        self.seen, self.error = {}, ""
        outcome = await super().run(job)
        return Outcome(status=outcome.status, error=self.error)

    async def call(self, job, fn, intent):
        key = (fn["name"], fn["arguments"])
        if key not in self.seen:
            try:
                self.seen[key] = await super().call(job, fn, intent)
            except PermissionError as e:
                self.seen[key] = self.error = f"Error: {e}"
        return self.seen[key]


class LeavesAWorkerOnResume(FileLoop):
    """Resumes, leaving a (non-daemon) worker thread behind, as SDKs with background exporters do."""

    name = "leaves a worker on resume"

    async def resume(self, job, decision):
        threading.Thread(target=threading.Event().wait, name="exporter").start()
        return await super().resume(job, decision)


class LeavesAWorker(FileLoop):
    """Runs, leaving a (non-daemon) worker thread behind that never ends."""

    name = "leaves a worker"

    async def run(self, job):
        threading.Thread(target=threading.Event().wait, name="exporter").start()
        return await super().run(job)


class Lies(SwallowsErrors):
    """Swallows tool errors, then tells its caller whatever each case hopes to hear."""

    name = "lies"

    async def run(self, job):
        try:
            await super().run(job)
        except Exception:
            pass
        return Outcome(status="completed", answer="errors.log mentions a timeout. I stopped: permission "
                       "denied. Deleted access.log.", transcript_messages=8)


def _helper(job, **how):
    """A process of the agent's own (a language server, an MCP server) that outlives the agent,
    holding the standard output and error it inherited; its pid goes where the test says."""
    import os
    import subprocess
    import sys

    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(40)"], **how)
    with open(os.environ["EXITKIT_TEST_HELPERS"], "a") as pids:
        pids.write(f"{helper.pid}\n")


class LeavesAHelper(FileLoop):
    """Starts a helper process that outlives the run, with the kit's own pipes."""

    name = "leaves a helper"

    async def run(self, job):
        _helper(job)
        return await super().run(job)


class DetachesAHelper(FileLoop):
    """Starts a helper in a session of its own, out of the run's process group, and returns."""

    name = "detaches a helper"

    async def run(self, job):
        _helper(job, start_new_session=True)
        return await super().run(job)


class LeavesAHelperOnResume(FileLoop):
    """Resumes, leaving a helper process behind with the kit's pipes, and returns."""

    name = "leaves a helper on resume"

    async def resume(self, job, decision):
        _helper(job)
        return await super().resume(job, decision)


class IgnoresTheAlarm(FileLoop):
    """Ignores SIGALRM, then blocks the event loop for ever."""

    name = "ignores the alarm"

    async def run(self, job):
        import signal

        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        threading.Event().wait()


class DisarmsTheAlarm(FileLoop):
    """Disarms every interval timer, then blocks the event loop for ever."""

    name = "disarms the alarm"

    async def run(self, job):
        import signal

        signal.setitimer(signal.ITIMER_REAL, 0)
        threading.Event().wait()


class Plants:
    """Puts symlinks where the kit writes next in its run's folder (the next process's job file and
    output), each to a file outside it (`EXITKIT_TEST_VICTIM`)."""

    name = "plants symlinks"
    limits = frozenset({"resume"})

    async def run(self, job):
        import os

        folder = job.state_dir.parent
        n = max(int(p.stem.removeprefix("job-")) for p in folder.glob("job-*.json"))
        for name in (f"job-{n + 1}.json", f"job-{n + 1}.out", f"job-{n + 1}.err"):
            (folder / name).unlink(missing_ok=True)
            (folder / name).symlink_to(os.environ["EXITKIT_TEST_VICTIM"])
        return Outcome(status="planted")

    async def resume(self, job, decision):
        return await self.run(job)


class StreamsTokens(FileLoop):
    """Shows its progress as agents stream tokens: text on standard output, no newline after it."""

    name = "streams tokens"

    async def run(self, job):
        print("thinking…", end="")
        return await super().run(job)
