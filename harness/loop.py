"""The agent loop, explained once.

`run(state, tools=..., options=..., client=...)` drives a `RunState` until it stops. A fresh
run, a resume after a crash and a continuation after an approval all take the same path:

1. Mark the run `running`. Completed and failed runs are final; continuing one is a usage
   error. Resumable stops (turn cap, budget, interrupted) simply continue.
2. If the cancellation signal is set, stop `interrupted/cancelled{reason}` — the run stays
   resumable.
3. Ask the transcript what is *pending*: tool calls of the last assistant message that no tool
   message answers. Run those first, one by one (steps 4–6), and come back to 2. Only when
   nothing is pending go to 7. So a resume never pays for a turn it already has, and an
   approved call is just a pending call that may now run.
4. Per call: an unknown tool or arguments that are not a JSON object become a tool error (as
   data). A write-ahead intent with no result means an earlier process died during this write:
   stop `interrupted/approval` *in doubt* instead of silently writing twice. A `needs_approval`
   tool whose call is neither approved nor auto-approved stops `interrupted/approval` with the
   call, so a person can decide — in this process or another, hours later.
5. Dedupe (`read-only`, or `all`: the naive cache kept to show why it is wrong): an identical
   earlier call answers this call's own `tool_call_id` with a note that the result was reused.
   Otherwise a tool that is not read-only gets its intent saved before it runs.
6. Run the tool with its context (sandbox, signal, progress). Its result, or its error worded by
   the policy, becomes the call's tool message and a `ToolRun`. The `fatal` policy and
   permanent errors (permission denied…) stop `failed` with the reason instead. A cancelled
   tool stops `interrupted/cancelled` and leaves the call pending. A write clears the dedupe
   cache. Save.
7. Nothing pending: check the turn cap, then the budget, *before* the call, so the overshoot is
   at most one turn. With a hard budget, count the prompt with the provider's own encoder and
   cap `max_tokens` at what the money left can buy; refuse the turn when not even
   `min_reply_tokens` fit. ("The provider's own encoder" is `o200k`: exact
   against the mock; against another provider the count is an estimate, and the hard
   budget's guarantee is only as good as that estimate.)
8. Call the model, raced against the signal. A provider error that retries cannot fix stops
   `failed` with the provider's message.
9. Add the cost from `usage` before anything else; append the reply; trace the turn; save.
10. A reply without tool calls completes the run. A reply cut at `max_tokens` is never
    executed blindly: each of its (truncated) calls is answered with a tool error saying so,
    and if the cut was the hard budget's the run stops `budget_exceeded`. Back to 2.

Every change is saved (each reply, each intent, each tool result, each stop), and
`options.checkpoint(name)` is called at named boundaries — "after_model_reply",
"before_save", "after_intent", "after_tool_result" (and the file store's "mid_save") — so a
test can kill the process at an exact point without sleeping.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import o200k
from harness.cancel import Cancel, Cancelled
from harness.catalog import default_tools, make_sandbox
from harness.client import ModelClient, ProviderError
from harness.state import (
    Approval,
    CancelledBy,
    Intent,
    Interruption,
    MaxBudget,
    MaxTurns,
    RunState,
    Status,
    ToolRun,
    pending,
    reason_of,
)
from harness.store import Store
from harness.tools import (
    PERMANENT_ERRORS,
    ErrorPolicy,
    Tool,
    ToolContext,
    catalog,
    error_text,
    schema,
    signature,
)
from harness.trace import TraceSink, event, money
from harness.usage import Limits, Pricing, limit_hit, reply_token_cap

Dedupe = Literal["off", "read-only", "all"]
TRUNCATED = "Error: not run: the call's arguments were cut off at max_tokens (finish_reason=length)."


@dataclass(frozen=True, kw_only=True)
class Progress:
    run_id: str
    call_id: str
    tool_name: str
    label: str


@dataclass(kw_only=True)
class RunOptions:
    model: str = "plan"
    """The model name; against the mock, the scenario."""
    mock_options: str | None = None
    """Per-request mock options (e.g. "latency=250+fault=429@1x2"), sent as x-mock-options."""
    limits: Limits = field(default_factory=Limits)
    pricing: Pricing = field(default_factory=Pricing)
    dedupe: Dedupe = "off"
    errors: ErrorPolicy = "descriptive"
    stop_on_permanent: bool = True
    """Permanent tool errors stop the run `failed`; False feeds them back like any error."""
    auto_approve: bool | Collection[str] = False
    """True, or the names of tools whose calls need no person."""
    cancel: Cancel = field(default_factory=Cancel)
    signal_reaches_tools: bool = True
    """False hands tools a signal that never fires (to measure why it should reach them)."""
    on_progress: Callable[[Progress], None] | None = None
    trace: TraceSink | None = None
    store: Store | None = None
    sandbox: Path | None = None
    """The tools' folder; default: a per-run folder under the temp dir, made on first use."""
    max_tokens: int | None = None
    """Longest reply to ask for (sent as `max_tokens`); the hard budget may lower it per turn."""
    min_reply_tokens: int = 16
    """Hard budget: refuse a turn that cannot afford at least this many reply tokens."""
    checkpoint: Callable[[str], None] | None = None
    """Test hook called at named boundaries (see the module docstring)."""


def default_sandbox(run_id: str) -> Path:
    path = Path(tempfile.gettempdir()) / "harness-sandboxes" / run_id
    return path if path.is_dir() else make_sandbox(path)


async def run(
    state: RunState,
    *,
    tools: Sequence[Tool] | None = None,
    options: RunOptions | None = None,
    client: ModelClient | None = None,
) -> RunState:
    """Drive `state` until it stops; returns the same (mutated) object."""
    if state.status in ("completed", "failed"):
        raise ValueError(
            f"run {state.run_id} is {state.status}, which is final; only max_turns_exceeded, "
            "budget_exceeded and interrupted runs can continue"
        )
    options = options or RunOptions()
    own_client = client is None
    client = client or ModelClient()
    try:
        loop = _Loop(state, default_tools() if tools is None else tools, options, client)
        return await loop.go()
    finally:
        if own_client:
            await client.aclose()


class _Loop:
    def __init__(self, state: RunState, tools: Sequence[Tool], options: RunOptions, client: ModelClient):
        self.s, self.o, self.client = state, options, client
        self.tools = catalog(tools)
        self.schemas = [schema(t) for t in tools]
        self.sandbox = options.sandbox or default_sandbox(state.run_id)
        self.headers = {"x-mock-options": options.mock_options} if options.mock_options else {}
        self.t0, self.base_ms = time.monotonic(), state.elapsed_ms

    async def go(self) -> RunState:
        s = self.s
        s.status, s.interruption, s.error = "running", None, None
        try:
            while s.status == "running":
                if self.o.cancel.is_set():
                    self.stop("interrupted", CancelledBy(reason=self.o.cancel.reason or "cancelled"))
                elif calls := pending(s):
                    await self.call(calls[0])
                else:
                    await self.turn()
        except asyncio.CancelledError:
            self.stop("interrupted", CancelledBy(reason="the task running the loop was cancelled"))
            raise
        return s

    # --- bookkeeping -------------------------------------------------------------------------

    def emit(self, type: str, **fields: Any) -> None:
        if self.o.trace is not None:
            self.o.trace.emit(event(self.s.run_id, type, **fields))

    def hook(self, name: str) -> None:
        if self.o.checkpoint is not None:
            self.o.checkpoint(name)

    def save(self) -> None:
        self.s.elapsed_ms = self.base_ms + (time.monotonic() - self.t0) * 1000
        self.hook("before_save")
        if self.o.store is not None:
            self.o.store.save(self.s)

    def stop(
        self, status: Status, interruption: Interruption | None = None, *, error: str | None = None
    ) -> None:
        s = self.s
        s.status, s.interruption, s.error = status, interruption, error
        self.emit("run_stopped", status=status, reason=reason_of(s), turns=s.turns, costUsd=money(s.cost_usd))
        self.save()

    def answer(self, call: dict[str, Any], content: str) -> None:
        self.s.messages.append(
            {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": content}
        )

    def progress(self, call_id: str, tool_name: str, label: str) -> None:
        self.emit("tool_progress", toolName=tool_name, label=label, callId=call_id)
        if self.o.on_progress is not None:
            self.o.on_progress(
                Progress(run_id=self.s.run_id, call_id=call_id, tool_name=tool_name, label=label)
            )

    def dedupes(self, tool: Tool) -> bool:
        return self.o.dedupe == "all" or (self.o.dedupe == "read-only" and tool.read_only)

    def auto_approved(self, tool: Tool) -> bool:
        a = self.o.auto_approve
        return a is True or (not isinstance(a, bool) and tool.name in a)

    # --- steps 4-6: one pending call ---------------------------------------------------------

    async def call(self, call: dict[str, Any]) -> None:
        s, call_id = self.s, call["id"]
        name, raw = call["function"]["name"], call["function"]["arguments"]
        tool = self.tools.get(name)
        try:
            args = json.loads(raw or "{}")
        except (ValueError, TypeError):
            args = None
        if tool is None:
            return self.refuse(call, LookupError(f"unknown tool {name!r}; known: {', '.join(self.tools)}"))
        if not isinstance(args, dict):
            return self.refuse(call, ValueError(f"arguments for {name} are not a JSON object: {raw!r}"))
        in_doubt = call_id in s.intents
        if in_doubt or (tool.needs_approval and not self.auto_approved(tool) and call_id not in s.approved):
            doubt = {"inDoubt": True} if in_doubt else {}
            self.emit("approval_required", toolName=name, args=raw, callId=call_id, **doubt)
            stop = Approval(call_id=call_id, tool_name=name, args=args, in_doubt=in_doubt)
            return self.stop("interrupted", stop)
        if call_id in s.approved:
            # An approval covers this call once: providers that reuse ids per reply must not
            # get a later, different call through on it. Saved together with the intent below.
            s.approved.remove(call_id)
        sig = signature(name, args)
        if self.dedupes(tool) and sig in s.cache:
            return self.reuse(call, s.cache[sig])
        if not tool.read_only:
            s.intents[call_id] = Intent(call_id=call_id, tool=name, args=args)
            self.save()
            self.hook("after_intent")
        await self.execute(call, tool, args, sig)

    def refuse(self, call: dict[str, Any], error: Exception) -> None:
        """A call that cannot even start: an error the model may correct, unless fatal."""
        if self.o.errors == "fatal":
            return self.stop("failed", error=str(error))
        self.answer(call, error_text(self.o.errors, error))
        self.save()

    def reuse(self, call: dict[str, Any], index: int) -> None:
        earlier = self.s.messages[index]
        self.emit("tool_result", toolName=call["function"]["name"], ms=0, ok=True, reused=True)
        note = f"(result reused from identical call {earlier['tool_call_id']})"
        self.answer(call, f"{earlier['content']}\n{note}")
        self.save()
        self.hook("after_tool_result")

    async def execute(self, call: dict[str, Any], tool: Tool, args: dict[str, Any], sig: str) -> None:
        s, o, call_id = self.s, self.o, call["id"]
        self.emit("tool_start", toolName=tool.name, args=call["function"]["arguments"], callId=call_id)
        ctx = ToolContext(
            run_id=s.run_id, call_id=call_id, sandbox=self.sandbox,
            cancel=o.cancel if o.signal_reaches_tools else Cancel(),
            progress=partial(self.progress, call_id, tool.name), client=self.client, trace=o.trace,
        )
        t0 = time.monotonic()
        error: Exception | None = None
        try:
            content = await tool.run(args, ctx)
        except Exception as e:  # noqa: BLE001 - every tool failure is data until classified below
            self.charge(ctx)
            if o.cancel.is_set():
                self.emit("tool_result", toolName=tool.name, ms=_ms(t0), ok=False, cancelled=True)
                return self.stop("interrupted", CancelledBy(reason=o.cancel.reason or "cancelled"))
            content, error = "", e
        else:
            self.charge(ctx)
        ms = _ms(t0)
        s.tool_runs.append(ToolRun(tool=tool.name, args=args, call_id=call_id, ok=error is None, ms=ms,
                                   details=dict(ctx.details)))
        self.emit("tool_result", toolName=tool.name, ms=round(ms), ok=error is None)
        if error is not None:
            if o.errors == "fatal" or (o.stop_on_permanent and isinstance(error, PERMANENT_ERRORS)):
                s.intents.pop(call_id, None)
                return self.stop("failed", error=f"{tool.name}: {error}")
            content = error_text(o.errors, error)
        self.answer(call, str(content))
        s.intents.pop(call_id, None)
        if not tool.read_only:
            s.cache.clear()
        if error is None and self.dedupes(tool):
            s.cache[sig] = len(s.messages) - 1
        self.save()
        self.hook("after_tool_result")

    def charge(self, ctx: ToolContext) -> None:
        """Money a tool spent (a sub-agent's model calls) counts against this run's budget too."""
        self.s.cost_usd += ctx.spent_usd
        self.s.tool_cost_usd += ctx.spent_usd

    # --- steps 7-10: one model turn ------------------------------------------------------------

    async def turn(self) -> None:
        s, o, limits = self.s, self.o, self.o.limits
        hit = limit_hit(limits, turns=s.turns, cost_usd=s.cost_usd)
        if hit == "max_turns":
            return self.stop("max_turns_exceeded", MaxTurns())
        if hit == "max_budget":
            return self.stop("budget_exceeded", MaxBudget())
        budget_cap = None
        if limits.hard_budget:
            prompt = o200k.prompt_tokens(s.messages, self.schemas or None)
            budget_cap = reply_token_cap(limits, o.pricing, cost_usd=s.cost_usd, prompt_tokens=prompt)
            if budget_cap is not None and budget_cap < max(1, o.min_reply_tokens):
                return self.stop("budget_exceeded", MaxBudget())
        cap = min((c for c in (o.max_tokens, budget_cap) if c is not None), default=None)
        try:
            reply = await self.client.complete(
                model=o.model, messages=s.messages, tools=self.schemas or None,
                max_tokens=cap, cancel=o.cancel, headers=self.headers,
            )
        except Cancelled as e:
            return self.stop("interrupted", CancelledBy(reason=e.reason))
        except ProviderError as e:
            return self.stop("failed", error=e.message)
        before = s.cost_usd
        s.cost_usd += o.pricing.cost(reply.usage)
        s.prompt_tokens += reply.usage.prompt_tokens
        s.completion_tokens += reply.usage.completion_tokens
        s.turns += 1
        s.turn_usage.append(reply.usage)
        s.messages.append(reply.message)
        self.emit("turn", turn=s.turns, prompt_tokens=reply.usage.prompt_tokens,
                  completion_tokens=reply.usage.completion_tokens, total_tokens=reply.usage.total_tokens,
                  costUsd=money(s.cost_usd), finish=reply.finish_reason)
        # Everything this reply decides is saved with it, in one write: a crash can never leave
        # a final answer on disk with the run still `running` (a resume would pay for a 4th turn).
        calls = reply.message.get("tool_calls") or []
        budget = limits.max_budget_usd
        cut_by_budget = reply.finish_reason == "length" and budget_cap is not None and cap == budget_cap
        if reply.finish_reason == "length":
            for c in calls:
                self.answer(c, TRUNCATED)
        if limits.budget_check == "after_call" and budget is not None and before >= budget:
            self.stop("budget_exceeded", MaxBudget())
        elif cut_by_budget:
            self.stop("budget_exceeded", MaxBudget())
        elif not calls:
            self.stop("completed")
        else:
            self.save()
        self.hook("after_model_reply")


def _ms(t0: float) -> float:
    return (time.monotonic() - t0) * 1000
