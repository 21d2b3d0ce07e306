"""Reruns every measurement of the chapter against the mock; `python -m experiments`.

Subpackages by job: `chapter/` (the chapter's experiments and its figures), `arithmetic/` (the
model that ties them together), `beyond/` (measurements past the chapter), `bench/`, `reliability/`,
`real_model/`, `peers/`, and `lab/` (what every experiment shares). See README.md beside this file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from types import ModuleType

# In the chapter's order, then the arithmetic that ties its figures together, then what goes past
# the chapter. Each module has NAME, TITLE, `async measure(env)` and `table`, `checks`, `prose` over
# it (see `lab/report.py`).
MODULES = {
    "plan": "experiments.chapter.plan",
    "turn_cap": "experiments.chapter.turn_cap",
    "budget": "experiments.chapter.budget",
    "tool_errors": "experiments.chapter.tool_errors",
    "permanent_error": "experiments.chapter.permanent_error",
    "dedupe": "experiments.chapter.dedupe",
    "dedupe_writes": "experiments.chapter.dedupe_writes",
    "approval": "experiments.chapter.approval",
    "rejection_wording": "experiments.chapter.rejection_wording",
    "kill_resume": "experiments.chapter.kill_resume",
    "cancellation": "experiments.chapter.cancellation",
    "trace": "experiments.chapter.approval_trace",
    "latency": "experiments.chapter.latency",
    "subagent": "experiments.chapter.subagent",
    "arithmetic": "experiments.arithmetic.arithmetic",
    "caching": "experiments.beyond.caching",
    "mcp_tool_errors": "experiments.beyond.mcp_tool_errors",
    "mcp_permanent_error": "experiments.beyond.mcp_permanent_error",
}
NAMES = tuple(MODULES)


class _Registry(Mapping[str, ModuleType]):
    """Experiment name -> module, imported only when asked for (pandas and matplotlib load late)."""

    def __getitem__(self, name: str) -> ModuleType:
        return import_module(MODULES[name])

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


REGISTRY: Mapping[str, ModuleType] = _Registry()
