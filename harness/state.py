"""The run as plain data: `RunState`, its statuses and interruptions, and `pending()`.

A run is not a closure. Everything the loop needs to continue — transcript, counters, money,
why it stopped, which calls a person approved, which writes were started — lives here and
round-trips through JSON losslessly, so a run approved hours later in another process ends
exactly as an uninterrupted one would.
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, assert_never, get_args

from harness.usage import Usage

SCHEMA_VERSION = 1
SUPPORTED_VERSIONS = (1,)

Status = Literal["running", "completed", "failed", "max_turns_exceeded", "budget_exceeded", "interrupted"]
RESUMABLE: frozenset[Status] = frozenset({"max_turns_exceeded", "budget_exceeded", "interrupted"})

Message = dict[str, Any]
"""One OpenAI chat message, exactly as sent on the wire."""

DEFAULT_SYSTEM = (
    "You are a careful assistant working in a folder of log files. Use the tools to look "
    "before you answer, never guess file contents, and answer in one short sentence."
)


@dataclass(frozen=True, kw_only=True)
class Approval:
    """Stopped before a call that needs a person's decision."""

    type: Literal["approval"] = "approval"
    call_id: str
    tool_name: str
    args: Any
    in_doubt: bool = False
    """True when a previous process started this write and died before recording its result:
    it may or may not have happened, so the harness will not repeat it on its own."""


@dataclass(frozen=True, kw_only=True)
class MaxTurns:
    type: Literal["max_turns"] = "max_turns"


@dataclass(frozen=True, kw_only=True)
class MaxBudget:
    type: Literal["max_budget"] = "max_budget"


@dataclass(frozen=True, kw_only=True)
class CancelledBy:
    """Stopped by the cancellation signal; `reason` is what the canceller said."""

    type: Literal["cancelled"] = "cancelled"
    reason: str


Interruption = Approval | MaxTurns | MaxBudget | CancelledBy


@dataclass(frozen=True, kw_only=True)
class Rejection:
    call_id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ToolRun:
    """One execution of a tool (deduped calls are not runs; failed ones are)."""

    tool: str
    args: Any
    call_id: str
    ok: bool
    ms: float
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

    call_id: str
    tool: str
    args: Any


@dataclass(kw_only=True)
class RunState:
    schema_version: int = SCHEMA_VERSION
    run_id: str
    messages: list[Message]
    turns: int = 0
    """Model calls made (each one billed)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    """Everything the run spent: its own model calls plus `tool_cost_usd`."""
    tool_cost_usd: float = 0.0
    """The part of `cost_usd` spent inside tools (a sub-agent's model calls)."""
    turn_usage: list[Usage] = field(default_factory=list)
    """Per-turn usage, in order: the quadratic bill, one entry per model call."""
    status: Status = "running"
    interruption: Interruption | None = None
    approved: list[str] = field(default_factory=list)
    """Call ids a person approved."""
    rejections: list[Rejection] = field(default_factory=list)
    error: str | None = None
    tool_runs: list[ToolRun] = field(default_factory=list)
    intents: dict[str, Intent] = field(default_factory=dict)
    """Started writes with no recorded result yet, by call id."""
    cache: dict[str, int] = field(default_factory=dict)
    """Dedupe cache: call signature -> index of the tool message holding its result."""
    elapsed_ms: float = 0.0
    """Wall time spent inside `run()`, summed over every process that worked on the run."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON for callers (the CLI keeps its flags here so `resume` can reuse them)."""

    @property
    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens)

    @property
    def answer(self) -> str | None:
        """The final assistant text of a completed run."""
        if self.status != "completed":
            return None
        last = self.messages[-1]
        return last.get("content") if last.get("role") == "assistant" else None

    @property
    def resumable(self) -> bool:
        return self.status in RESUMABLE


def new_run(
    task: str,
    *,
    system: str | None = DEFAULT_SYSTEM,
    run_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> RunState:
    """A fresh run whose transcript is the system prompt (if any) and the user's task."""
    messages: list[Message] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": task})
    return RunState(run_id=run_id or secrets.token_hex(4), messages=messages, meta=dict(meta or {}))


def pending(state: RunState) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message that no tool message answers yet."""
    last_assistant = next(
        (i for i in range(len(state.messages) - 1, -1, -1) if state.messages[i].get("role") == "assistant"),
        None,
    )
    if last_assistant is None:
        return []
    after = state.messages[last_assistant + 1 :]
    if any(m.get("role") != "tool" for m in after):
        return []
    answered = {m.get("tool_call_id") for m in after}
    calls = state.messages[last_assistant].get("tool_calls") or []
    return [c for c in calls if c["id"] not in answered]


def reason_of(state: RunState) -> str:
    """One word (or the error) saying why the run is where it is."""
    stop = state.interruption
    if stop is None:
        return state.error or state.status
    match stop:
        case Approval():
            return "approval (in doubt)" if stop.in_doubt else "approval"
        case MaxTurns() | MaxBudget():
            return stop.type
        case CancelledBy():
            return stop.reason
        case _:
            assert_never(stop)


# --- JSON ---------------------------------------------------------------------------------


class StateFileError(ValueError):
    """A saved run that cannot be loaded: corrupt, foreign, or of an unknown schema version."""


_INTERRUPTIONS: dict[str, type] = {
    "approval": Approval, "max_turns": MaxTurns, "max_budget": MaxBudget, "cancelled": CancelledBy,
}


def to_json(state: RunState) -> str:
    return json.dumps(asdict(state), ensure_ascii=False, indent=1)


def from_json(text: str, *, source: str = "run state") -> RunState:
    """Parse a saved run; `StateFileError` naming `source` and the problem otherwise."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise StateFileError(f"{source} is not valid JSON ({e}); the file was left untouched") from None
    if not isinstance(data, dict) or "run_id" not in data or "schema_version" not in data:
        raise StateFileError(f"{source} is not a harness run (no run_id/schema_version)")
    version = data["schema_version"]
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        raise StateFileError(
            f"{source} has schema_version {version!r}; this harness supports {list(SUPPORTED_VERSIONS)}"
        )
    try:
        _check_shape(data)
        return _decode(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise StateFileError(f"{source} is a damaged harness run ({type(e).__name__}: {e})") from None


_SHAPE: dict[str, type | tuple[type, ...]] = {
    "run_id": str, "messages": list, "turns": int, "prompt_tokens": int, "completion_tokens": int,
    "cost_usd": (int, float), "turn_usage": list, "approved": list, "rejections": list,
    "tool_runs": list, "intents": dict, "cache": dict, "meta": dict,
}


def _check_shape(data: dict[str, Any]) -> None:
    """Fail on load, not three turns later, when a field has the wrong type."""
    for key, kind in _SHAPE.items():
        value = data.get(key)
        if key in data and (not isinstance(value, kind) or isinstance(value, bool)):
            raise TypeError(f"field {key!r} is {type(value).__name__}")
    if not all(isinstance(m, dict) for m in data["messages"]):
        raise TypeError("field 'messages' holds something other than message objects")
    if not math.isfinite(data.get("cost_usd", 0.0)):
        raise ValueError(f"field 'cost_usd' is {data['cost_usd']!r}")
    if data.get("status") not in get_args(Status):
        raise ValueError(f"unknown status {data.get('status')!r}")


def _decode(data: dict[str, Any]) -> RunState:
    stop = data.pop("interruption")
    if stop is not None:
        stop = _INTERRUPTIONS[stop["type"]](**stop)
    return RunState(
        **{k: v for k, v in data.items() if k not in ("turn_usage", "rejections", "tool_runs", "intents")},
        interruption=stop,
        turn_usage=[Usage(**u) for u in data["turn_usage"]],
        rejections=[Rejection(**r) for r in data["rejections"]],
        tool_runs=[ToolRun(**t) for t in data["tool_runs"]],
        intents={k: Intent(**v) for k, v in data["intents"].items()},
    )
