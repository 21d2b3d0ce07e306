"""What every peer module is given and what it hands back.

A peer module (one per framework, plus `ours`) exposes the same coroutines, each written the way
that framework's documentation writes it: `run` (a scenario under a turn cap), `tool_error`,
`budget`, `approval_stop` / `approval_resume` (the resume runs in a new process) and `stop_slow`.
What the caller gets is an `Ending`; everything counted is counted elsewhere, at the mock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from experiments.peers.folder import Folder
from experiments.runs import TASKS


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

    @classmethod
    def raised(cls, error: BaseException) -> Ending:
        return cls(how=f"raised {type(error).__name__}", text=str(error))


API_KEY = "unused"
"""The mock needs no key; the clients insist on one."""
