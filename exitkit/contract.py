"""The adapter contract: what the kit hands an agent, and what the agent hands back.

An adapter is one object with a `name`, the set of `limits` its framework has at all, and
two coroutines:

    async def run(self, job: Job) -> Outcome          # start the agent on job.task
    async def resume(self, job: Job, decision: Decision | None) -> Outcome
                                                      # continue from job.state_dir, in a NEW process

`run` builds the agent the way its framework's documentation does: the model is `job.model`
at `job.base_url` (any API key will do), the system prompt `job.system`, the tools `job.tools`
wrapped in the framework's tool type, and the limits of `job.limits` that the framework has
(each `None` when the case does not ask for it). It stops when `job.cancel` is set (the kit's
Stop button) by whatever cancel API the framework offers, and saves to `job.state_dir`
whatever a new process needs to `resume`. It returns what the framework returned; an exception
that escapes is the outcome too (the kit records its type and text), so an adapter need not
catch anything.

`resume` is called in a fresh process (`python -m exitkit.child`) with the same job and a
decision: `Approve()` or `Reject(reason)` for the call the run stopped on, or `None` to simply
continue (after a turn cap or a Stop). Adapters without approvals or resume leave them out of
`limits` and may omit `resume`: the kit then reports "none exists" and never fakes one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from exitkit.functions import as_blocking, as_function

T = TypeVar("T")
LimitName = Literal["max_turns", "max_budget_usd", "approval", "cancel", "resume"]
LIMIT_NAMES: tuple[LimitName, ...] = ("max_turns", "max_budget_usd", "approval", "cancel", "resume")
"""Every limit an adapter may declare; the kit checks a declared set against these names."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One of the kit's tools, for the adapter to wrap in its framework's tool type."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments (an object)."""
    call: Callable[..., Awaitable[str]]
    """`await tool.call(**arguments)` -> the result text. Raises on a tool error (the exception's
    message is the sentence a model needs). Cancel the awaiting task to deliver Stop to it."""
    read_only: bool = True
    """False for a tool with a side effect (`delete_file`)."""

    def function(self) -> Callable[..., Awaitable[str]]:
        """`call` as an async function named for the tool, with a Google-style docstring and a typed
        signature from `parameters`: for frameworks that build a tool from a Python function."""
        return as_function(self.name, self.description, self.parameters, self.call)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What the case asks the agent to enforce; `None` where the case does not ask."""

    max_turns: int | None = None
    """Model requests allowed in this run."""
    max_budget_usd: float | None = None
    """Dollars allowed, at $2/M input and $12/M output tokens (the chapter's prices)."""
    needs_approval: frozenset[str] = frozenset()
    """Names of the tools that must not run before a person approves the call."""


@dataclass(frozen=True, kw_only=True)
class Job:
    """Everything the kit hands the adapter for one run."""

    base_url: str
    """The scripted provider's OpenAI-compatible `/v1` URL."""
    model: str
    """The scenario, as the model name."""
    task: str
    """The user's message."""
    system: str
    tools: tuple[Tool, ...]
    limits: Limits
    cancel: asyncio.Event
    """Set by the kit when it presses Stop."""
    state_dir: Path
    """The adapter's own folder for what it saves to resume (the same folder in the new process)."""
    api_key: str = "exitkit-unused"
    mcp_url: str | None = None
    """The same `tools` over MCP (Streamable HTTP), for an adapter that declares `tools = "mcp"`
    (`exitkit.mcp`); None for the others."""

    def tool(self, name: str) -> Tool:
        return next(t for t in self.tools if t.name == name)

    async def unless_stopped(self, work: Awaitable[T]) -> T | None:
        """Await `work` (a tool call) unless Stop is pressed first: then cancel it, so the tool
        sees the cancellation, and return None. For loops without a cancel API of their own."""
        task, stop = asyncio.ensure_future(work), asyncio.ensure_future(self.cancel.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        return None

    def blocking(self, tool: Tool) -> Callable[..., str]:
        """`tool` as a synchronous function, for a framework that calls its tools from a worker
        thread (run it with `asyncio.to_thread`): each call runs on this job's event loop (make
        the function there, in `run`), Stop cancels it, and it then raises `ToolCancelled`."""
        return as_blocking(tool.name, tool.description, tool.parameters, tool.call, self.unless_stopped)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What the caller got back from the framework."""

    status: str
    """The framework's own word for how the run ended (e.g. `completed`, `interrupted`, `raised
    MaxTurnsExceeded`)."""
    answer: str = ""
    error: str = ""
    """The exception's or the failure's text, if any."""
    transcript_messages: int | None = None
    """How many messages of the conversation the framework's own API handed back to the caller at
    the stop (its return value, or what its exception carries); None when it handed none back.
    Never read from a checkpoint or a side channel the caller did not get."""

    @classmethod
    def raised(cls, error: BaseException) -> Outcome:
        return cls(status=f"raised {type(error).__name__}", error=str(error))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Approve:
    """Let the call the run stopped on run."""


@dataclass(frozen=True)
class Reject:
    """Refuse the call the run stopped on, with a reason the model should read."""

    reason: str


Decision = Approve | Reject


def decision_to_json(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {"reject": decision.reason} if isinstance(decision, Reject) else {"approve": True}


def decision_from_json(data: Any) -> Decision | None:
    if data is None:
        return None
    if isinstance(data, dict) and isinstance(data.get("reject"), str):
        return Reject(data["reject"])
    if isinstance(data, dict) and data.get("approve") is True:
        return Approve()
    raise ValueError(f"not a decision: {json.dumps(data)[:200]}")


@runtime_checkable
class Adapter(Protocol):
    name: str
    limits: frozenset[str]
    """Which of `LIMIT_NAMES` the framework has at all."""

    async def run(self, job: Job) -> Outcome: ...


@dataclass(frozen=True, kw_only=True)
class Declared:
    """An adapter as the kit sees it: where it came from and what it says it has."""

    spec: str
    """`module:attribute`, as given on the command line."""
    name: str
    limits: frozenset[str] = field(default_factory=frozenset)

    def has(self, limit: LimitName) -> bool:
        return limit in self.limits
