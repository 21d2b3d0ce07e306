"""Reruns every measurement of the chapter against the mock; `python -m experiments`."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

# In the chapter's order; each module has NAME, TITLE and `async measure(env) -> Outcome`.
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
)


REGISTRY: dict[str, ModuleType] = {name: import_module(f"experiments.{name}") for name in NAMES}
