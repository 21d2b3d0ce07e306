"""Reruns every measurement of the chapter against the mock; `python -m experiments`."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

# In the chapter's order, then the arithmetic that ties its figures together. Each module has
# NAME, TITLE, `async measure(env)` and `table`, `checks`, `prose` over it (see `report.py`).
NAMES = (
    "plan",
    "turn_cap",
    "budget",
    "tool_errors",
    "permanent_error",
    "dedupe",
    "dedupe_writes",
    "approval",
    "rejection_wording",
    "kill_resume",
    "cancellation",
    "trace",
    "latency",
    "subagent",
    "arithmetic",
)


REGISTRY: dict[str, ModuleType] = {name: import_module(f"experiments.{name}") for name in NAMES}
REGISTRY["caching"] = import_module("experiments.beyond.caching")
