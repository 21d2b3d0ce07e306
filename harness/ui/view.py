"""`RunView`: everything the run page shows, read once per request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.state import RunState
from harness.ui.markup import Markup


@dataclass(kw_only=True)
class RunView:
    state: RunState
    lease: dict[str, Any] | None
    ledger: list[dict[str, Any]]
    trace: list[dict[str, Any]]
    trace_note: str | None = None
    resume_here: bool = False
    """The UI was started with --resume: a decided run continues in this process."""
    messages: list[Markup] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return bool(self.lease and self.lease.get("held"))


def holder(lease: dict[str, Any]) -> str:
    h = lease.get("holder") or {}
    command = f" ({h.get('command')})" if h.get("command") else ""
    return f"process {h.get('pid', '?')} on {h.get('host', '?')}{command}"
