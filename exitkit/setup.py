"""One run's setup as a plain value: written to `job.json`, so a new process builds the same job."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from exitkit.contract import Job, Limits
from exitkit.ledger import Ledger
from exitkit.process import created
from exitkit.tools import SYSTEM, TASKS, Toolbox, make_sandbox


@dataclass(frozen=True, kw_only=True)
class Setup:
    base_url: str
    scenario: str
    folder: Path
    """The run's folder: `sandbox/`, `state/`, `ledger.jsonl`, `job.json`."""
    max_turns: int | None = None
    max_budget_usd: float | None = None
    needs_approval: tuple[str, ...] = ()
    scan_seconds: float = 3.0
    crash_after_effect: bool = False

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.folder / "ledger.jsonl")

    @property
    def sandbox(self) -> Path:
        return self.folder / "sandbox"

    def make(self) -> Setup:
        """Create the folder, its sandbox and an empty ledger; returns self."""
        (self.folder / "state").mkdir(parents=True)
        make_sandbox(self.sandbox)
        self.ledger.path.write_text("")
        return self

    def toolbox(self, ledger: Ledger | None = None, crash: Callable[[], None] | None = None) -> Toolbox:
        """The run's tools, writing to `ledger` (default: the run's) and killing `crash` (default:
        their own process) in the crash case."""
        return Toolbox(root=self.sandbox, ledger=self.ledger if ledger is None else ledger, crash=crash,
                       scan_seconds=self.scan_seconds, crash_after_effect=self.crash_after_effect)

    @property
    def limits(self) -> Limits:
        return Limits(max_turns=self.max_turns, max_budget_usd=self.max_budget_usd,
                      needs_approval=frozenset(self.needs_approval))

    def job(self) -> Job:
        return Job(base_url=self.base_url, model=self.scenario, task=TASKS[self.scenario], system=SYSTEM,
                   tools=self.toolbox().tools(), limits=self.limits, cancel=asyncio.Event(),
                   state_dir=self.folder / "state")

    def but(self, **changes: Any) -> Setup:
        return replace(self, **changes)

    def save(self, path: Path) -> None:
        with created(path) as f:
            f.write(json.dumps(asdict(self) | {"folder": str(self.folder)}).encode())

    @classmethod
    def load(cls, path: Path) -> Setup:
        data = json.loads(path.read_text())
        return cls(**data | {"folder": Path(data["folder"]), "needs_approval": tuple(data["needs_approval"])})
