"""The tool seam: what a tool is, what it is given, and how its failures become words.

A tool is any object with a name, a description, a JSON-schema `parameters`, two flags and
an async `run(args, ctx) -> str`. It holds whatever it works on (a folder, a client) itself;
the harness gives it only the run's context. Adding one takes about ten lines:

    @dataclass(frozen=True)
    class WordCount:
        root: Path
        name: str = "word_count"
        description: str = "Count the words in a file."
        parameters: dict = field(default_factory=lambda: {
            "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
        read_only: bool = True
        needs_approval: bool = False

        async def run(self, args, ctx):
            return str(len((self.root / args["path"]).read_text().split()))

Raise any exception to report a failure: the run's error policy turns it into a tool message.
Raise `PermanentToolError` (or let a `PermissionError` escape) when no message can fix it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from harness.cancel import Cancel
from harness.usage import Pricing

if TYPE_CHECKING:
    from harness.trace import TraceSink


class PermanentToolError(Exception):
    """A failure the model cannot act on (permission denied, quota gone): stop the run."""


PERMANENT_ERRORS: tuple[type[BaseException], ...] = (PermanentToolError, PermissionError)


@dataclass(kw_only=True)
class ToolContext:
    """What a running tool may use besides its arguments."""

    run_id: str
    call_id: str
    cancel: Cancel
    """Check it (or `await cancel.sleep(...)`) and stop promptly with `Cancelled`."""
    progress: Callable[[str], None]
    """Report a step: traced as `tool_progress` and passed to the run's `on_progress`."""
    trace: TraceSink | None = None
    budget_left_usd: float | None = None
    """What the run may still spend; a tool that spends money (a sub-agent) stays within it."""
    hard_budget: bool = False
    """Whether the run's budget is hard (never overshot); a sub-agent inherits it."""
    pricing: Pricing = field(default_factory=Pricing)
    """The run's prices; a sub-agent bills its own model calls at them."""
    details: dict[str, Any] = field(default_factory=dict)
    """Anything the tool wants kept in its `ToolRun` record (e.g. a child's run id)."""
    spent_usd: float = 0.0
    """Money the tool spent on model calls (a sub-agent's); the loop adds it to the run's cost."""

    @property
    def idempotency_key(self) -> str:
        """`<run id>:<call id>`, the same in every process that runs or re-runs this call: pass it
        to a downstream system (an `Idempotency-Key` header, a unique column) so an effect
        repeated after a crash is recognised there. The harness's own tool ledger keys on it."""
        return f"{self.run_id}:{self.call_id}"


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool
    needs_approval: bool

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str: ...


def schema(tool: Tool) -> dict[str, Any]:
    """The OpenAI `tools[]` entry for `tool`."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def catalog(tools: Sequence[Tool]) -> dict[str, Tool]:
    by_name: dict[str, Tool] = {}
    for t in tools:
        if t.name in by_name:
            raise ValueError(f"two tools are named {t.name!r}")
        by_name[t.name] = t
    return by_name


def signature(name: str, args: Any) -> str:
    """What 'the same call' means for dedupe: the name and canonical JSON of the arguments."""
    return f"{name}:{json.dumps(args, sort_keys=True, separators=(',', ':'))}"


ErrorPolicy = Literal["fatal", "generic", "descriptive"] | Callable[[BaseException], str]
"""What the model is told when a tool raises: `fatal` stops the run `failed`; `generic` says
only that something failed; `descriptive` passes the error's own sentence; a function decides."""

GENERIC_ERROR = "Error: the tool failed."


def error_text(policy: ErrorPolicy, error: BaseException) -> str:
    """The tool message for `error` under a non-fatal `policy`."""
    if callable(policy):
        return policy(error)
    if policy == "generic":
        return GENERIC_ERROR
    if policy == "descriptive":
        return f"Error: {error}"
    raise ValueError(f"error policy {policy!r} has no text; use fatal, generic, descriptive or a function")
