"""The run as plain data: `RunState`, the one value that says how it stopped, and `pending()`.

A run is not a closure. Everything the loop needs to continue — transcript, counters, money,
why it stopped, which calls a person approved, which writes were started — lives here and
round-trips through JSON losslessly (`harness.codec`), so a run approved hours later in another
process ends exactly as an uninterrupted one would.

How a run stopped is one tagged value, `RunState.stop`; `status`, `interruption` and `error`
are derived from it, so they can never disagree.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, assert_never

from harness.usage import NonNegative, Usage

Status = Literal["running", "completed", "failed", "max_turns_exceeded", "budget_exceeded", "interrupted"]

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass(frozen=True)
class Id:
    """Type annotation marker: a non-empty string naming something (a call, a tool)."""

    def check(self, value: str) -> str | None:
        return None if value else "must be a non-empty string"


@dataclass(frozen=True)
class NonEmpty:
    """Type annotation marker: a list with at least one item (a transcript starts with the task)."""

    def check(self, value: list) -> str | None:
        return None if value else "must not be empty"


CallId = Annotated[str, Id()]


@dataclass(frozen=True)
class ChatMessage:
    """Type annotation marker: an OpenAI chat message the loop can read back (checked on load)."""

    def check(self, m: dict[str, Any]) -> str | None:
        if m.get("role") not in ROLES:
            return f"has role {m.get('role')!r}"
        if not isinstance(m.get("content"), str | list | type(None)):
            return "has content that is not a string, a list or null"
        if m["role"] == "tool" and not (isinstance(m.get("tool_call_id"), str) and m["tool_call_id"]):
            return "is a tool message without a tool_call_id"
        calls = m.get("tool_calls")
        if calls is None:
            return None
        if not isinstance(calls, list):
            return "has tool_calls that are not a list"
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            if not (isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"] and isinstance(fn, dict)
                    and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str)):
                return "has a tool call without a non-empty string id, a name and arguments"
        return None


Message = dict[str, Any]
"""One OpenAI chat message, exactly as sent on the wire."""

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""What a run id may be: a safe file name, matched in full (no path, no newline)."""


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} is not a safe name (1-128 of letters, digits, . _ -)")
    return run_id


# --- how a run stopped ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Completed:
    """The model answered without asking for a tool."""

    type: Literal["completed"] = "completed"


@dataclass(frozen=True, kw_only=True)
class Failed:
    """Final: a provider refused for good, a fatal tool error, a permanent error."""

    type: Literal["failed"] = "failed"
    reason: str


@dataclass(frozen=True, kw_only=True)
class MaxTurns:
    type: Literal["max_turns"] = "max_turns"


@dataclass(frozen=True, kw_only=True)
class MaxBudget:
    type: Literal["max_budget"] = "max_budget"


@dataclass(frozen=True, kw_only=True)
class Approval:
    """Stopped before a call that needs a person's decision."""

    type: Literal["approval"] = "approval"
    call_id: CallId
    tool_name: str
    args: Any
    in_doubt: bool = False
    """True when a previous process started this write and died before recording its result:
    it may or may not have happened, so the harness will not repeat it on its own."""


@dataclass(frozen=True, kw_only=True)
class CancelledBy:
    """Stopped by the cancellation signal; `reason` is what the canceller said."""

    type: Literal["cancelled"] = "cancelled"
    reason: str


Interruption = Approval | MaxTurns | MaxBudget | CancelledBy
"""The resumable stops."""
Stop = Completed | Failed | Interruption


def status_of(stop: Stop | None) -> Status:
    match stop:
        case None:
            return "running"
        case Completed():
            return "completed"
        case Failed():
            return "failed"
        case MaxTurns():
            return "max_turns_exceeded"
        case MaxBudget():
            return "budget_exceeded"
        case Approval() | CancelledBy():
            return "interrupted"
        case _:
            assert_never(stop)


# --- records --------------------------------------------------------------------------------


def args_digest(tool_name: str, arguments: str) -> str:
    """What an approval is bound to: the tool and the canonical JSON of its arguments."""
    try:
        canonical = json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canonical = arguments
    return hashlib.sha256(f"{tool_name}\0{canonical}".encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Approved:
    """A person's yes to one call, valid only while the call is still the one they saw."""

    call_id: CallId
    tool_name: str
    digest: Annotated[str, Id()]
    """`args_digest` of the call when it was approved."""


def is_approved(state: RunState, call: dict[str, Any]) -> bool:
    """Whether a person approved `call` as it reads now: same id, same tool, same arguments."""
    name = call["function"]["name"]
    digest = args_digest(name, call["function"]["arguments"])
    return any(a.call_id == call["id"] and a.tool_name == name and a.digest == digest for a in state.approved)


@dataclass(frozen=True, kw_only=True)
class Rejection:
    call_id: CallId
    reason: str


@dataclass(frozen=True, kw_only=True)
class ToolRun:
    """One execution of a tool (deduped calls are not runs; failed ones are)."""

    tool: str
    args: Any
    call_id: CallId
    ok: bool
    ms: Annotated[float, NonNegative()]
    details: dict[str, Any] = field(default_factory=dict)
    """Whatever the tool chose to record, e.g. a sub-agent's run id and cost."""

    @property
    def label(self) -> str:
        """`read_file:errors.log`, or just the tool's name when it took no path."""
        path = self.args.get("path") if isinstance(self.args, dict) else None
        return f"{self.tool}:{path}" if path else self.tool


@dataclass(frozen=True, kw_only=True)
class Intent:
    """Write-ahead record: a non-read-only tool is about to run for this call."""

    call_id: CallId
    tool: str
    args: Any


# --- the run --------------------------------------------------------------------------------

SCHEMA_VERSION = 2


@dataclass(kw_only=True)
class RunState:
    schema_version: int = SCHEMA_VERSION
    run_id: str
    messages: Annotated[list[Annotated[Message, ChatMessage()]], NonEmpty()]
    turns: Annotated[int, NonNegative()] = 0
    """Model calls made (each one billed)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens billed for the run's own model calls, summed."""
    cost_usd: Annotated[float, NonNegative()] = 0.0
    """Everything the run spent: its own model calls plus `tool_cost_usd`."""
    tool_cost_usd: Annotated[float, NonNegative()] = 0.0
    """The part of `cost_usd` spent inside tools (a sub-agent's model calls)."""
    turn_usage: list[Usage] = field(default_factory=list)
    """Per-turn usage, in order: the quadratic bill, one entry per model call."""
    stop: Stop | None = None
    """None while running; otherwise how the run stopped."""
    approved: list[Approved] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    tool_runs: list[ToolRun] = field(default_factory=list)
    intents: dict[str, Intent] = field(default_factory=dict)
    """Started writes with no recorded result yet, by call id."""
    cache: dict[str, Annotated[int, NonNegative()]] = field(default_factory=dict)
    """Dedupe cache: call signature -> index of the tool message holding its result."""
    elapsed_ms: Annotated[float, NonNegative()] = 0.0
    """Wall time spent inside `run()`, summed over every process that worked on the run."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON for callers (the CLI keeps its settings here so `resume` can reuse them)."""

    @property
    def status(self) -> Status:
        return status_of(self.stop)

    @property
    def interruption(self) -> Interruption | None:
        return self.stop if isinstance(self.stop, Approval | MaxTurns | MaxBudget | CancelledBy) else None

    @property
    def error(self) -> str | None:
        return self.stop.reason if isinstance(self.stop, Failed) else None

    @property
    def resumable(self) -> bool:
        return self.interruption is not None

    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.usage.completion_tokens

    @property
    def answer(self) -> str | None:
        """The final assistant text of a completed run."""
        if not isinstance(self.stop, Completed):
            return None
        last = self.messages[-1]
        return last.get("content") if last.get("role") == "assistant" else None


def new_run(
    task: str,
    *,
    system: str | None = None,
    run_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> RunState:
    """A fresh run whose transcript is the system prompt (if any) and the user's task."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": task})
    rid = secrets.token_hex(4) if run_id is None else check_run_id(run_id)
    return RunState(run_id=rid, messages=messages, meta=dict(meta or {}))


def pending(state: RunState) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message that no tool message answers yet."""
    messages = state.messages
    i = len(messages) - 1
    while i >= 0 and messages[i].get("role") == "tool":
        i -= 1
    if i < 0 or messages[i].get("role") != "assistant":
        return []
    answered = {m.get("tool_call_id") for m in messages[i + 1 :]}
    return [c for c in messages[i].get("tool_calls") or () if c["id"] not in answered]


def reason_of(state: RunState) -> str:
    """One word (or the error) saying why the run is where it is."""
    stop = state.stop
    match stop:
        case None | Completed():
            return state.status
        case Failed():
            return stop.reason
        case Approval():
            return "approval (in doubt)" if stop.in_doubt else "approval"
        case MaxTurns() | MaxBudget():
            return stop.type
        case CancelledBy():
            return stop.reason
        case _:
            assert_never(stop)
