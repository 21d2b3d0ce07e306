"""This repository's harness as an exitkit adapter: every limit the contract names exists.

The kit's tools become harness tools (Stop reaches a tool by cancelling the task awaiting it),
the run is saved in a `SQLiteStore` in the job's state folder (once per read-only turn, and
around every call with an effect: docs/harness.md), and `resume` loads it in the new process,
applies the decision with `approve` / `reject` and runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from exitkit import Approve, Decision, Job, Outcome, Reject
from exitkit import Tool as KitTool
from harness import (
    Cancel,
    Limits,
    ModelClient,
    OpenAIChat,
    Policy,
    RunState,
    SQLiteStore,
    ToolContext,
    approve,
    new_run,
    reject,
)
from harness import run as run_harness
from harness.state import Approval, reason_of
from harness.tools import ErrorPolicy

RUN_ID = "exitkit-run"


@dataclass(frozen=True)
class _Tool:
    """A kit tool as a harness tool."""

    tool: KitTool
    needs_approval: bool

    @property
    def name(self) -> str:
        return self.tool.name

    @property
    def description(self) -> str:
        return self.tool.description

    @property
    def parameters(self) -> dict[str, Any]:
        return self.tool.parameters

    @property
    def read_only(self) -> bool:
        return self.tool.read_only

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        # Stop cancels the task running the tool, as it does the model call: no second task to
        # race it against on every call.
        with ctx.cancel.cancels_this_task():
            return await self.tool.call(**args)


def _outcome(state: RunState) -> Outcome:
    if state.status == "completed":
        return Outcome(status="completed", answer=state.answer or "",
                       transcript_messages=len(state.messages))
    return Outcome(status=f"{state.status} ({reason_of(state)})", answer=state.answer or "",
                   error=state.error or "", transcript_messages=len(state.messages))


class Ours:
    name = "ours (harness)"
    limits = frozenset({"max_turns", "max_budget_usd", "approval", "cancel", "resume"})
    errors: ErrorPolicy = "descriptive"

    async def _go(self, job: Job, state: RunState, store: SQLiteStore) -> Outcome:
        tools = [_Tool(t, t.name in job.limits.needs_approval) for t in job.tools]
        limits = Limits(max_turns=job.limits.max_turns, max_budget_usd=job.limits.max_budget_usd)
        cancel = Cancel()

        async def press() -> None:
            await job.cancel.wait()
            cancel.set("user pressed Stop")

        watcher = asyncio.ensure_future(press())
        try:
            async with ModelClient(job.base_url, api_key=job.api_key) as client:
                model = OpenAIChat(job.model, client=client)
                await run_harness(state, model=model, tools=tools, limits=limits,
                                  policy=Policy(errors=self.errors), cancel=cancel, store=store)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        return _outcome(state)

    async def run(self, job: Job) -> Outcome:
        store = SQLiteStore.in_folder(job.state_dir)
        return await self._go(job, new_run(job.task, system=job.system, run_id=RUN_ID), store)

    async def resume(self, job: Job, decision: Decision | None) -> Outcome:
        store = SQLiteStore.in_folder(job.state_dir)
        state = store.load(RUN_ID)
        if isinstance(decision, Approve) and isinstance(state.interruption, Approval):
            approve(state)
        elif isinstance(decision, Reject):
            reject(state, reason=decision.reason)
        return await self._go(job, state, store)


class OursGeneric(Ours):
    """The contrast the chapter draws: a tool error worded as "the tool failed", nothing more."""

    name = "ours, errors=\"generic\""
    errors = "generic"
