"""What every peer module is given and what it hands back.

A peer module (one per framework, plus `ours`) exposes the same coroutines, each written the way
that framework's documentation writes it: `caps` (a scenario under a turn cap, in that framework's
setting or settings), `run`, `tool_error`, `budget`, `approval_stop` / `approval_resume` (the
resume runs in a new process) and `stop_slow` (waits for the lab's Stop button, then calls the
framework's own cancel API). What the caller gets is an `Ending`; everything counted is counted
elsewhere, at the mock.

This module and `folder.py` are all a memory child imports besides the peer itself, so neither
may import pandas, matplotlib or another experiment (`experiments.lab.runs` would bring them).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from experiments.peers.folder import Folder

TASKS = {
    "plan": "Which file mentions a timeout?",
    "runaway": "Which file mentions a timeout?",
    "recover": "Which file mentions a timeout?",
    "destructive": "Look at the log folder and tell me what is in it.",
    "slow": "Scan the archive for known incidents.",
}
"""The user's task per scenario, as `experiments.lab.runs.TASKS` has it (a test keeps them equal)."""


@dataclass(frozen=True, kw_only=True)
class Case:
    base_url: str
    """The mock's `/v1` URL."""
    folder: Folder
    state_file: Path
    """Where an approval run saves what a new process needs to resume it."""

    @classmethod
    def at(cls, base_url: str, directory: Path) -> Case:
        return cls(base_url=base_url, folder=Folder.at(directory), state_file=directory / "state")

    def task(self, scenario: str) -> str:
        return TASKS[scenario]


@dataclass(frozen=True, kw_only=True)
class Ending:
    """What the caller got back: how the call ended, and the answer or the exception's message."""

    how: str
    """`returned`, `raised <Exception>`, or a framework's own stopped state."""
    text: str = ""
    pending: str = ""
    """Calls the run kept unrun in a state it can resume from (only our harness keeps any)."""

    @classmethod
    def raised(cls, error: BaseException) -> Ending:
        return cls(how=f"raised {type(error).__name__}", text=str(error))


@asynccontextmanager
async def stop_button(stop: asyncio.Event, press: Callable[[], object]) -> AsyncIterator[None]:
    """While the block runs, call `press` (the framework's cancel API) once the lab sets `stop`.

    The lab owns the clock: it sets `stop` at the same moment for every peer, so the time from
    that moment to the run's end is the framework's, not its setup's."""

    async def wait_then_press() -> None:
        await stop.wait()
        press()

    watcher = asyncio.create_task(wait_then_press())
    try:
        yield
    finally:
        watcher.cancel()


API_KEY = "unused"
"""The mock needs no key; the clients insist on one."""
