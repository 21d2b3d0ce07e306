"""The file loop, each broken in one way a real agent is: the kit must fail exactly that case."""

from file_loop import FileLoop


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
