"""Harness runs for the experiments: the ONE place that builds harness options, tools, sandboxes
and traces, and calls `harness.run`.

Experiments describe a run with named knobs (`run_scenario(env, "runaway", max_turns=8)`); this
module turns them into the harness's API, so a change of that API is ported here alone. The
chapter's teaching knobs — dedupe of every tool, the budget checked after the call, the signal
passed only to HTTP, permanent errors fed back, an empty rejection — are parameters here, so an
experiment can also be run with its mechanism broken (the tests do).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import o200k
from experiments.chapter.figures import SUB_AGENT
from experiments.lab.report import usd
from harness import (
    Cancel,
    MemoryTrace,
    Model,
    ModelClient,
    OpenAIChat,
    Policy,
    Pricing,
    RunState,
    SQLiteStore,
    Tool,
    ToolContext,
    approve,
    new_run,
    pending,
    reject,
    run,
)
from harness.chapter import (
    SYSTEM,
    BudgetCheck,
    Knobs,
    ListFiles,
    ReadFile,
    Research,
    Taught,
    chapter_tools,
    every_tool,
    limits_checked,
    make_sandbox,
)
from harness.codec import from_json, to_json
from harness.state import ToolRun
from harness.tools import schema
from harness.trace import read_jsonl

Dedupe = Literal["off", "read-only", "all"]
ErrorWording = Literal["fatal", "generic", "descriptive"]
Decision = Callable[[RunState], object]
"""What a person does to a run stopped for approval (approve it, reject it, …)."""

# The user's task per scenario: short and realistic, never tuned to the chapter's counts.
TASKS = {
    "plan": "Which file mentions a timeout?",
    "runaway": "Which file mentions a timeout?",
    "recover": "Which file mentions a timeout?",
    "denied": "What does private.key contain?",
    "once": "Which files are in the folder?",
    "repeat": "Which files are in the folder?",
    "destructive": "Look at the log folder and tell me what is in it.",
    "double_delete": "Delete access.log.",
    "slow": "Scan the archive for known incidents.",
    "research": "Find out which file mentions a timeout.",
}


@dataclass(frozen=True, kw_only=True)
class Env:
    """Where and how an experiment runs."""

    base_url: str
    """The mock's `/v1` URL (a real loopback socket)."""
    fast: bool = False
    """Smaller sweeps, for the test suite's quick pass; findings must still hold."""
    workdir: Path = field(default_factory=lambda: Path(os.environ.get("TMPDIR", "/tmp")))
    """Scratch space for sandboxes and saved runs."""
    client: ModelClient | None = None
    """One connection pool for every run (each run makes its own when None)."""


@dataclass(frozen=True, kw_only=True)
class Child:
    """The `research` tool's sub-agent: which scenario it runs and its own turn cap."""

    model: str = "plan"
    max_turns: int = SUB_AGENT.max_turns
    latency_ms: int | None = None
    charged: bool = True
    """False drops the child's spending instead of charging it to the parent (broken, for the tests)."""


@dataclass(frozen=True, kw_only=True)
class Run:
    state: RunState
    trace: MemoryTrace
    sandbox: Path
    wall_ms: float

    @property
    def tool_runs(self) -> int:
        return len(self.state.tool_runs)

    def runs_of(self, tool: str) -> list[Any]:
        return [
            r.args.get("path") if isinstance(r.args, dict) else r.args
            for r in self.state.tool_runs
            if r.tool == tool
        ]


def _tools(
    sandbox: Path, scan_seconds: float, child: Child | None, knobs: Knobs, model: OpenAIChat | None = None
) -> list[Tool]:
    """The chapter's catalog, or a parent's tools whose `research` child runs `child.model`
    (on `model`'s client; without a model, the tools are built only for their definitions)."""
    if child is None:
        tools = chapter_tools(sandbox, scan_seconds=scan_seconds)
    else:
        name = child.model + (f"+latency={child.latency_ms}" if child.latency_ms is not None else "")
        files = [ListFiles(sandbox), ReadFile(sandbox)]
        child_model: Model = model.with_name(name) if model is not None else _Unused()
        research: Tool = Research(model=child_model, tools=files, max_turns=child.max_turns)
        tools = [*files, research if child.charged else _Uncharged(research)]
    return [Taught(t, knobs) for t in tools] if knobs != Knobs() else tools


async def run_scenario(
    env: Env,
    scenario: str,
    *,
    run_id: str,
    task: str | None = None,
    state: RunState | None = None,
    sandbox: Path | None = None,
    max_turns: int | None = 20,
    budget_usd: float | None = None,
    budget_check: BudgetCheck = "before_call",
    hard_budget: bool = False,
    dedupe: Dedupe = "off",
    errors: ErrorWording = "descriptive",
    feed_back_permanent: bool = False,
    deaf_tools: bool = False,
    auto_approve: bool = False,
    cancel: Cancel | None = None,
    on_progress: Callable[[str], None] | None = None,
    trace: MemoryTrace | None = None,
    latency_ms: int | None = None,
    scan_seconds: float = 3.0,
    child: Child | None = None,
    drain_pending: bool = False,
    drifting_tools: bool = False,
    hidden_note: str | None = None,
    pricing: Pricing | None = None,
    tools: Sequence[Tool] | None = None,
) -> Run:
    """Run (or continue `state` of) `scenario` through the harness against the mock; time it.

    `scenario` is the model name; the user's task is `task`, or the scenario's own (`TASKS`).
    `drain_pending=True` runs a capped run's pending calls after the cap (a broken loop, for the tests);
    `drifting_tools=True` makes a repeated call's result differ from the first; `hidden_note` is
    sent with every request but never kept in the transcript (both broken, for the tests);
    `tools` replaces the chapter's catalog (a server's tools over MCP, say)."""
    sandbox = sandbox or make_sandbox(env.workdir / run_id)
    trace = trace if trace is not None else MemoryTrace()
    state = state or new_run(task if task is not None else TASKS[scenario], system=SYSTEM, run_id=run_id)
    knobs = Knobs(deaf_tools=deaf_tools, feed_back_permanent=feed_back_permanent)
    settings: dict[str, Any] = dict(
        limits=limits_checked(budget_check, max_turns=max_turns, max_budget_usd=budget_usd,
                              hard_budget=hard_budget),
        policy=Policy(errors=errors, dedupe=every_tool if dedupe == "all" else dedupe == "read-only",
                      auto_approve=auto_approve),
        cancel=cancel or Cancel(), trace=trace, pricing=pricing or Pricing(),
        on_progress=(lambda p: on_progress(p.label)) if on_progress else None,
    )
    headers = {"x-mock-options": f"latency={latency_ms}"} if latency_ms is not None else None
    started = time.perf_counter()
    async with _client(env) as client:
        model: Any = OpenAIChat(scenario, client=client, headers=headers)
        model = _Whispering(model, hidden_note) if hidden_note else model
        catalog = list(tools) if tools is not None else _tools(sandbox, scan_seconds, child, knobs, model)
        catalog = [_Drifting(t) for t in catalog] if drifting_tools else catalog
        await run(state, model=model, tools=catalog, **settings)
        if drain_pending and state.status == "max_turns_exceeded":
            await _drain(state, catalog)
    return Run(state=state, trace=trace, sandbox=sandbox, wall_ms=(time.perf_counter() - started) * 1000)


async def _drain(state: RunState, tools: list[Tool]) -> None:
    """What a loop that runs the pending calls before its cap check leaves: the last turn's calls
    executed and recorded, though the model never reads their results."""
    by_name = {t.name: t for t in tools}
    for call in pending(state):
        name, args = call["function"]["name"], json.loads(call["function"]["arguments"] or "{}")
        ctx = ToolContext(run_id=state.run_id, call_id=call["id"], cancel=Cancel(), progress=lambda _: None)
        try:
            content, ok = await by_name[name].run(args, ctx), True
        except Exception as e:  # any failure is recorded as the loop would: a failed run
            content, ok = str(e), False
        state.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        state.tool_runs.append(ToolRun(tool=name, args=args, call_id=call["id"], ok=ok, ms=0.0))


class _Whispering:
    """A model whose every request carries a system note the run's transcript never records: the
    provider bills for text the harness cannot account for."""

    def __init__(self, inner: OpenAIChat, note: str) -> None:
        self.inner, self.note = inner, note

    def _with_note(self, messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [*messages, {"role": "system", "content": self.note}]

    async def complete(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        return await self.inner.complete(self._with_note(messages), **kwargs)

    def count_prompt_tokens(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> int:
        return self.inner.count_prompt_tokens(self._with_note(messages), tools)

    def with_name(self, name: str) -> OpenAIChat:
        return self.inner.with_name(name)


class _Drifting:
    """A tool whose every repeated call returns a little more than the last: the same call no
    longer gets the same result, so a repeat no longer costs exactly one more identical turn."""

    def __init__(self, inner: Tool) -> None:
        self.inner, self.calls = inner, 0
        self.name, self.description, self.parameters = inner.name, inner.description, inner.parameters
        self.read_only, self.needs_approval = inner.read_only, inner.needs_approval

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        self.calls += 1
        out = await self.inner.run(args, ctx)
        return out if self.calls == 1 else f"{out}\n(listed again: call {self.calls})"


class _Uncharged:
    """A tool whose spending is dropped, not charged to the run that called it: a sub-agent
    whose model calls the parent never pays for (the bug a parent budget check cannot see)."""

    def __init__(self, inner: Tool) -> None:
        self.inner = inner
        self.name, self.description, self.parameters = inner.name, inner.description, inner.parameters
        self.read_only, self.needs_approval = inner.read_only, inner.needs_approval

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        before = ctx.spent_usd
        try:
            return await self.inner.run(args, ctx)
        finally:
            ctx.spent_usd = before


class _Unused:
    """Stands in for a child's model where tools are built only for their definitions."""

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a tool built for its definition was run")

    def count_prompt_tokens(self, *args: Any) -> int:
        raise AssertionError("a tool built for its definition was run")


@asynccontextmanager
async def _client(env: Env) -> AsyncIterator[ModelClient]:
    """The shared connection pool, or one of this run's own."""
    if env.client is not None:
        yield env.client
    else:
        async with ModelClient(env.base_url) as client:
            yield client


@asynccontextmanager
async def open_client(env: Env) -> AsyncIterator[Env]:
    """`env` with one connection pool that every run inside the block shares."""
    async with ModelClient(env.base_url) as client:
        yield replace(env, client=client)


# --- what a person does between two runs, and what a process left on disk -------------------


def approve_it(state: RunState) -> None:
    approve(state)


def reject_with(reason: str) -> Decision:
    """Reject the call the run stopped for, telling the model `reason` (may be empty, unsafely)."""
    return lambda state: reject(state, reason=reason, unsafe_empty=not reason.strip())


def copy_of(state: RunState) -> RunState:
    """An independent copy (the loop mutates the state it is given)."""
    return from_json(to_json(state))


def load_saved(directory: Path, run_id: str) -> RunState:
    return SQLiteStore.in_folder(directory).load(run_id)


def forget_intents(directory: Path, run_id: str) -> None:
    """What a harness without write-ahead intents would see on disk: nothing says a write started."""
    store = SQLiteStore.in_folder(directory)
    state = store.load(run_id)
    state.intents.clear()
    store.save(state)


def forget_cost(directory: Path, run_id: str) -> None:
    """What a harness that does not save the spend would restore: the run's cost starts at zero."""
    store = SQLiteStore.in_folder(directory)
    state = store.load(run_id)
    state.cost_usd = state.tool_cost_usd = 0.0
    store.save(state)


def saved_trace(directory: Path, run_id: str) -> list[dict[str, Any]]:
    return read_jsonl(directory / "traces" / f"{run_id}.jsonl")


def turn_costs(state: RunState) -> list[float]:
    """What each model call cost, at the default (the chapter's) prices."""
    pricing = Pricing()
    return [pricing.cost(u) for u in state.turn_usage]


def new_cancel() -> Cancel:
    return Cancel()


class TraceThen(MemoryTrace):
    """A memory trace that calls `then(event)` after recording each event (to act mid-run)."""

    def __init__(self, then: Callable[[dict[str, Any]], None]) -> None:
        super().__init__()
        self.then = then

    def emit(self, event: dict[str, Any]) -> None:
        super().emit(event)
        self.then(event)


def memory_trace() -> MemoryTrace:
    return MemoryTrace()


def request_tokens(r: Run, *, child: Child | None = None) -> list[int]:
    """Each model call's prompt, counted on our side from the transcript the harness kept and the
    tool definitions it sent — a count of what was sent, made without the provider's `usage`."""
    defs = [schema(t) for t in _tools(r.sandbox, 3.0, child, Knobs())]
    msgs = r.state.messages
    return [o200k.prompt_tokens(msgs[:i], defs) for i, m in enumerate(msgs) if m.get("role") == "assistant"]


def reply_tokens(r: Run) -> list[int]:
    """Each reply counted on our side: its text, or its tool-call JSON as the wire carries it."""
    return [
        o200k.count(o200k.tool_calls_json(m["tool_calls"]))
        if m.get("tool_calls")
        else o200k.count(m.get("content") or "")
        for m in r.state.messages
        if m.get("role") == "assistant"
    ]


def summary(label: str, r: Run) -> dict[str, Any]:
    """The chapter's summary line as a table row."""
    s = r.state
    return {
        "run": label,
        "turns": s.turns,
        "tools": r.tool_runs,
        "in": s.prompt_tokens,
        "out": s.completion_tokens,
        "cost": usd(s.cost_usd),
        "status": s.status,
    }
