"""Our harness at the same exits: the one module that calls it, so an API change is ported here.

Its own catalog over the same sandbox, each tool wrapped only to note its runs in the shared log
(so every row counts tool runs the same way), `Limits` for turns and money, `FileStore` +
`approve` for a resume in another process, and `Cancel` for Stop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from experiments.peers.case import Case, Ending, stop_button
from experiments.peers.folder import Folder
from harness import (
    Cancel,
    FileStore,
    Limits,
    ModelClient,
    OpenAIChat,
    Policy,
    RunState,
    Tool,
    ToolContext,
    approve,
    new_run,
    pending,
)
from harness import run as run_harness
from harness.cancel import Cancelled
from harness.chapter import SYSTEM, chapter_tools
from harness.state import Approval, reason_of
from harness.tools import ErrorPolicy

NAME, PACKAGE = "ours (harness)", "harness-lab"
SPEND_LIMITS = "`Limits(max_budget_usd=...)`, checked before each call"
ERROR_SETTING = "contrast row: errors=\"generic\", the deliberately worse wording"
"""What `tool_error(documented=True)` switches on: for us the default is the documented setting,
so the second row shows the vague sentence the frameworks send, for contrast."""
RUN_ID = "destructive-1"


@dataclass(frozen=True)
class _Noted:
    """A catalog tool that notes each run in the shared log, as the frameworks' tools do."""

    tool: Tool
    folder: Folder

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tool, name)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        label = self.tool.name + (f":{args['path']}" if "path" in args else "")
        self.folder.note(label if self.tool.name != "scan_archive" else "scan_archive:start")
        try:
            result = await self.tool.run(args, ctx)
        except Cancelled:
            self.folder.note(f"{self.tool.name}:cancelled")
            raise
        if self.tool.name == "scan_archive":
            self.folder.note("scan_archive:finished")
        return result


def _ending(state: RunState) -> Ending:
    if state.status == "completed":
        return Ending(how="completed", text=state.answer or "")
    if isinstance(state.interruption, Approval):
        stop = state.interruption
        return Ending(how="interrupted (approval)", text=f"{stop.tool_name}({json.dumps(stop.args)})")
    waiting = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in pending(state))
    return Ending(how=f"{state.status} ({reason_of(state)})", text=state.answer or state.error or "",
                  pending=waiting)


async def _run(case: Case, scenario: str, state: RunState | None = None, **options: Any) -> Ending:
    tools = [_Noted(t, case.folder) for t in chapter_tools(case.folder.root)]
    state = state or new_run(case.task(scenario), system=SYSTEM, run_id=RUN_ID)
    async with ModelClient(case.base_url) as client:
        await run_harness(state, model=OpenAIChat(scenario, client=client), tools=tools, **options)
    return _ending(state)


async def run(case: Case, scenario: str, cap: int) -> Ending:
    return await _run(case, scenario, limits=Limits(max_turns=cap))


def caps(cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    return [(f"max_turns={cap}", lambda case: run(case, "runaway", cap))]


async def tool_error(case: Case, documented: bool) -> Ending:
    errors: ErrorPolicy = "generic" if documented else "descriptive"
    return await _run(case, "recover", limits=Limits(max_turns=10), policy=Policy(errors=errors))


def budgets(usd: float, outside_cap: int) -> list[tuple[str, Callable[[Case], Awaitable[Ending]]]]:
    limits = Limits(max_turns=outside_cap, max_budget_usd=usd)
    return [(f"max_budget_usd={usd}", lambda case: _run(case, "runaway", limits=limits))]


async def approval_stop(case: Case) -> Ending:
    return await _run(case, "destructive", limits=Limits(max_turns=8), store=FileStore(case.state_file))


async def approval_resume(case: Case) -> Ending:
    store = FileStore(case.state_file)
    state = store.load(RUN_ID)
    approve(state)
    return await _run(case, "destructive", state, limits=Limits(max_turns=8), store=store)


async def stop_slow(case: Case, stop: asyncio.Event) -> Ending:
    cancel = Cancel()
    async with stop_button(stop, lambda: cancel.set("user pressed Stop")):
        return await _run(case, "slow", limits=Limits(max_turns=5), cancel=cancel)
