"""The agent loop, explained once.

`run(state, model=..., tools=...)` drives a `RunState` until it stops. A fresh run, a resume
after a crash and a continuation after an approval all take the same path:

1. Clear the stop. Completed and failed runs are final; continuing one is a usage error.
   Resumable stops (turn cap, budget, approval, cancelled) simply continue.
2. At the top of every iteration, before anything runs: if the cancellation signal is set,
   stop `cancelled{reason}`; if the turn cap or the budget is reached, stop there
   (`harness.usage.limit_hit`, the one place limits are checked). So the overshoot is at most
   one turn, and a capped run keeps its next step: the calls of its last reply stay pending.
3. Ask the transcript what is *pending*: tool calls of the last assistant message that no tool
   message answers. Run the first (steps 4–6) and go back to 2. Only when nothing is pending
   go to 7. A resume never pays for a turn it already has, and an approved call is just a
   pending call that may now run.
4. Per call: an unknown tool or arguments that are not a JSON object become a tool error (as
   data). A write-ahead intent with no result means an earlier process died during this write:
   stop `approval` *in doubt* instead of silently writing twice. A `needs_approval` tool
   whose call is neither auto-approved nor approved *as it now reads* (same tool, same
   arguments) stops `approval` with the call, so a person can decide — in this process or
   another, hours later.
5. With dedupe on (read-only tools, or whichever tools `Policy.dedupe` picks), an identical
   earlier call answers this call's own `tool_call_id` with a note that the result was reused.
   Otherwise a tool that is not read-only gets its intent saved before it runs.
6. Run the tool with its context (signal, progress, the budget left). Its result, or its error
   worded by the policy, becomes the call's tool message and a `ToolRun`; money it spent (a
   sub-agent's) is added to the run's cost. The `fatal` policy and permanent errors
   (permission denied…) stop `failed` with the reason instead. A cancelled tool stops
   `cancelled` and leaves the call pending. A write clears the dedupe cache. A write's result is
   saved at once; a read-only result is saved when the reply has no call left to run, so a turn
   whose calls are read-only is one commit, its reply and results together (a crash before that
   commit loses that one turn, which a resume asks for again; no write is ever in it).
7. Nothing pending: with a hard budget, price the prompt with the model's own count and cap
   `max_tokens` at what the money left can buy (`harness.usage.reply_cap`); refuse the turn
   when not even `min_reply_tokens` fit. Call the model, raced against the signal. A provider
   error that retries cannot fix stops `failed` with the provider's message.
8. Add the cost from `usage` before anything else (the client has already refused usage
   that is not a whole number in range); append the reply; trace the turn. A reply without
   tool calls completes the run. A reply cut at `max_tokens` is never executed blindly: each
   of its (truncated) calls is answered with a tool error saying so, and if the cut was the
   hard budget's the run stops `max_budget`. Calls beyond `Policy.max_tool_calls` and calls
   whose arguments exceed `Policy.max_argument_bytes` are answered with an error the model
   reads and never run; oversized arguments are replaced in the saved reply, so they are not
   sent back to the provider. Everything the reply decides is saved in one write: with its
   calls' results (step 6), or at once when none of its calls is left to run. Back to 2.

`checkpoint(name)` is called at named boundaries — "after_model_reply" (the reply recorded; saved
only if nothing of it runs), "before_save", "after_intent", "after_tool_result" (the result
recorded, saved at once for a write) and the store's "mid_save", inside a save's transaction —
so a test can kill the process at an exact point without sleeping.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from harness.cancel import Cancel, Cancelled
from harness.model import Model, ProviderError
from harness.state import (
    Approval,
    CancelledBy,
    Completed,
    Failed,
    Intent,
    MaxBudget,
    MaxTurns,
    RunState,
    Stop,
    ToolRun,
    is_approved,
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
from harness.trace import TraceSink, event, money, usage_details
from harness.usage import Limits, Pricing, Usage, limit_hit, reply_cap

TRUNCATED = "Error: not run: the call's arguments were cut off at max_tokens (finish_reason=length)."


@dataclass(frozen=True, kw_only=True)
class Policy:
    """How a run treats tools and replies (limits and prices are separate values)."""

    errors: ErrorPolicy = "descriptive"
    dedupe: bool | Callable[[Tool], bool] = False
    """Reuse the result of an identical earlier call: True for read-only tools (the only safe
    choice), or a function picking the tools (the chapter's naive cache picks every tool)."""
    auto_approve: bool | Collection[str] = frozenset()
    """True, or the names of tools whose calls need no person."""
    max_tokens: int | None = None
    """Longest reply to ask for (sent as `max_tokens`); the hard budget may lower it per turn."""
    min_reply_tokens: int = 16
    """Hard budget: refuse a turn that cannot afford at least this many reply tokens."""
    max_tool_calls: int = 64
    """Calls one reply may make; the rest are answered with an error and never run."""
    max_argument_bytes: int = 1_000_000
    """Largest arguments (UTF-8 bytes) a call may carry; larger ones are not run nor echoed."""

    def __post_init__(self) -> None:
        for name in ("max_tool_calls", "max_argument_bytes", "min_reply_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Progress:
    run_id: str
    call_id: str
    tool_name: str
    label: str


async def run(
    state: RunState,
    *,
    model: Model,
    tools: Sequence[Tool],
    limits: Limits = Limits(),
    pricing: Pricing = Pricing(),
    policy: Policy = Policy(),
    cancel: Cancel | None = None,
    store: Store | None = None,
    trace: TraceSink | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    checkpoint: Callable[[str], None] | None = None,
) -> RunState:
    """Drive `state` until it stops; returns the same (mutated) object."""
    if isinstance(state.stop, Completed | Failed):
        raise ValueError(
            f"run {state.run_id} is {state.status}, which is final; only max_turns_exceeded, "
            "budget_exceeded and interrupted runs can continue"
        )
    loop = _Loop(state, model, tools, limits, pricing, policy, cancel or Cancel(), store, trace,
                 on_progress, checkpoint)
    return await loop.go()


class _Loop:
    def __init__(self, state, model, tools, limits, pricing, policy, cancel, store, trace,
                 on_progress, checkpoint) -> None:
        self.s, self.model, self.cancel = state, model, cancel
        self.tools = catalog(tools)
        self.schemas = [schema(t) for t in tools] or None
        self.limits, self.pricing, self.policy = limits, pricing, policy
        self.store, self.trace, self.on_progress, self.checkpoint = store, trace, on_progress, checkpoint
        self.t0, self.base_ms = time.monotonic(), state.elapsed_ms

    async def go(self) -> RunState:
        s = self.s
        s.stop = None
        try:
            while s.stop is None:
                if stop := self.stop_before_step():
                    self.end(stop)
                elif calls := pending(s):
                    await self.call(calls[0])
                else:
                    await self.turn()
        except asyncio.CancelledError:
            self.end(CancelledBy(reason="the task running the loop was cancelled"))
            raise
        return s

    def stop_before_step(self) -> Stop | None:
        s = self.s
        if self.cancel.is_set():
            return CancelledBy(reason=self.cancel.reason or "cancelled")
        last = self.pricing.cost(s.turn_usage[-1]) if s.turn_usage else 0.0
        match limit_hit(self.limits, turns=s.turns, cost_usd=s.cost_usd, last_turn_usd=last):
            case "max_turns":
                return MaxTurns()
            case "max_budget":
                return MaxBudget()
            case None:
                return None

    # --- bookkeeping -------------------------------------------------------------------------

    def emit(self, type: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace.emit(event(self.s.run_id, type, **fields))

    def hook(self, name: str) -> None:
        if self.checkpoint is not None:
            self.checkpoint(name)

    def save(self) -> None:
        self.s.elapsed_ms = self.base_ms + (time.monotonic() - self.t0) * 1000
        self.hook("before_save")
        if self.store is not None:
            self.store.save(self.s)

    def save_turn(self) -> None:
        """Save once the last reply has no call left to run (its calls' results ride with it)."""
        if not pending(self.s):
            self.save()

    def end(self, stop: Stop) -> None:
        s = self.s
        s.stop = stop
        self.emit("run_stopped", status=s.status, reason=reason_of(s), turns=s.turns,
                  costUsd=money(s.cost_usd))
        self.save()

    def answer(self, call: dict[str, Any], content: str) -> None:
        # An answered call is done: an approval of its id must not carry over to a later call
        # that reuses the id (providers that number calls per reply do).
        self.s.approved = [a for a in self.s.approved if a.call_id != call["id"]]
        self.s.messages.append(
            {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": content}
        )

    def progress(self, call_id: str, tool_name: str, label: str) -> None:
        self.emit("tool_progress", toolName=tool_name, label=label, callId=call_id)
        if self.on_progress is not None:
            self.on_progress(
                Progress(run_id=self.s.run_id, call_id=call_id, tool_name=tool_name, label=label)
            )

    def dedupes(self, tool: Tool) -> bool:
        chosen = self.policy.dedupe
        return chosen(tool) if callable(chosen) else chosen and tool.read_only

    def approved(self, tool: Tool, call: dict[str, Any]) -> bool:
        auto = self.policy.auto_approve
        if auto is True or (not isinstance(auto, bool) and tool.name in auto):
            return True
        return is_approved(self.s, call)

    # --- steps 4-6: one pending call ---------------------------------------------------------

    async def call(self, call: dict[str, Any]) -> None:
        s, call_id = self.s, call["id"]
        name, raw = call["function"]["name"], call["function"]["arguments"]
        tool = self.tools.get(name)
        try:
            args = json.loads(raw or "{}")
        except ValueError:
            args = None
        if tool is None:
            return self.refuse(call, LookupError(f"unknown tool {name!r}; known: {', '.join(self.tools)}"))
        if not isinstance(args, dict):
            return self.refuse(call, ValueError(f"arguments for {name} are not a JSON object: {raw!r}"))
        in_doubt = call_id in s.intents
        if in_doubt or (tool.needs_approval and not self.approved(tool, call)):
            self.emit("approval_required", toolName=name, args=raw, callId=call_id,
                      **({"inDoubt": True} if in_doubt else {}))
            return self.end(Approval(call_id=call_id, tool_name=name, args=args, in_doubt=in_doubt))
        # An approval covers this call once (saved together with the intent below).
        s.approved = [a for a in s.approved if a.call_id != call_id]
        sig = signature(name, args) if self.dedupes(tool) else None  # canonical JSON: only when used
        if sig is not None and sig in s.cache:
            return self.reuse(call, s.cache[sig])
        if not tool.read_only:
            s.intents[call_id] = Intent(call_id=call_id, tool=name, args=args)
            self.save()
            self.hook("after_intent")
        await self.execute(call, tool, args, sig)

    def refuse(self, call: dict[str, Any], error: Exception) -> None:
        """A call that cannot even start: an error the model may correct, unless fatal."""
        if self.policy.errors == "fatal":
            return self.end(Failed(reason=str(error)))
        self.answer(call, error_text(self.policy.errors, error))
        self.save_turn()

    def reuse(self, call: dict[str, Any], index: int) -> None:
        earlier = self.s.messages[index]
        self.emit("tool_result", toolName=call["function"]["name"], ms=0, ok=True, reused=True)
        note = f"(result reused from identical call {earlier['tool_call_id']})"
        self.answer(call, f"{earlier['content']}\n{note}")
        self.save_turn()
        self.hook("after_tool_result")

    async def execute(self, call: dict[str, Any], tool: Tool, args: dict[str, Any], sig: str | None) -> None:
        s, call_id = self.s, call["id"]
        self.emit("tool_start", toolName=tool.name, args=call["function"]["arguments"], callId=call_id)
        ctx = ToolContext(
            run_id=s.run_id, call_id=call_id, cancel=self.cancel, trace=self.trace,
            progress=partial(self.progress, call_id, tool.name),
            budget_left_usd=self.limits.budget_left(s.cost_usd), hard_budget=self.limits.hard_budget,
            pricing=self.pricing,
        )
        t0 = time.monotonic()
        error: Exception | None = None
        try:
            content = await tool.run(args, ctx)
        except Exception as e:  # noqa: BLE001 - every tool failure is data until classified below
            content, error = "", e
        finally:
            self.charge(ctx)  # even when the task is cancelled: a sub-agent's calls were paid
        if error is not None and self.cancel.is_set():
            self.emit("tool_result", toolName=tool.name, ms=_ms(t0), ok=False, cancelled=True)
            return self.end(CancelledBy(reason=self.cancel.reason or "cancelled"))
        s.tool_runs.append(ToolRun(tool=tool.name, args=args, call_id=call_id, ok=error is None, ms=_ms(t0),
                                   details=dict(ctx.details)))
        self.emit("tool_result", toolName=tool.name, ms=round(_ms(t0)), ok=error is None)
        s.intents.pop(call_id, None)
        if error is not None:
            if self.policy.errors == "fatal" or isinstance(error, PERMANENT_ERRORS):
                return self.end(Failed(reason=f"{tool.name}: {error}"))
            content = error_text(self.policy.errors, error)
        self.answer(call, str(content))
        if not tool.read_only:
            s.cache = {}  # replaced, never cleared in place: the store journals only its growth
        if error is None and sig is not None:
            s.cache[sig] = len(s.messages) - 1
        if tool.read_only:
            self.save_turn()
        else:
            self.save()
        self.hook("after_tool_result")

    def charge(self, ctx: ToolContext) -> None:
        """Money a tool spent (a sub-agent's model calls) counts against this run's budget too."""
        self.s.cost_usd += ctx.spent_usd
        self.s.tool_cost_usd += ctx.spent_usd

    # --- steps 7-8: one model turn -------------------------------------------------------------

    async def turn(self) -> None:
        s, policy = self.s, self.policy
        budget_cap = None
        if self.limits.hard_budget:
            prompt = self.model.count_prompt_tokens(s.messages, self.schemas)
            budget_cap = reply_cap(self.limits, self.pricing, cost_usd=s.cost_usd, prompt_tokens=prompt,
                                   min_reply_tokens=policy.min_reply_tokens)
            if budget_cap == 0:
                return self.end(MaxBudget())
        cap = min((c for c in (policy.max_tokens, budget_cap) if c is not None), default=None)
        try:
            reply = await self.model.complete(
                s.messages, tools=self.schemas, max_tokens=cap, cancel=self.cancel
            )
        except Cancelled as e:
            return self.end(CancelledBy(reason=e.reason))
        except ProviderError as e:
            return self.end(Failed(reason=e.message))
        refused = self.police(reply.message)
        self.record(reply.usage, reply.message, reply.finish_reason)
        calls = reply.message.get("tool_calls") or []
        cut = reply.finish_reason == "length"
        for c in calls:
            if cut or c["id"] in refused:
                self.answer(c, TRUNCATED if cut else refused[c["id"]])
        if cut and budget_cap is not None and cap == budget_cap:
            self.end(MaxBudget())
        elif not calls:
            self.end(Completed())
        else:
            self.save_turn()
        self.hook("after_model_reply")

    def police(self, message: dict[str, Any]) -> dict[str, str]:
        """Errors for the calls of a reply that will not run (over the caps), by call id.

        Oversized arguments are replaced in `message` itself, so the saved transcript (and so
        every later request) carries a short note instead of the provider's megabytes.
        """
        cap, limit = self.policy.max_tool_calls, self.policy.max_argument_bytes
        refused: dict[str, str] = {}
        for n, c in enumerate(message.get("tool_calls") or []):
            size = len(c["function"]["arguments"].encode("utf-8", "surrogatepass"))
            if size > limit:
                c["function"]["arguments"] = json.dumps({"omitted_bytes": size})
                refused[c["id"]] = (f"Error: not run: the arguments were {size:,} bytes, over the "
                                    f"{limit:,}-byte limit. Send smaller arguments.")
            elif n >= cap:
                refused[c["id"]] = (f"Error: not run: a reply may make at most {cap} tool calls; "
                                    f"this was call {n + 1}. Ask again for the calls you still need.")
        return refused

    def record(self, usage: Usage, message: dict[str, Any], finish: str) -> None:
        s = self.s
        s.cost_usd += self.pricing.cost(usage)
        s.usage += usage
        s.turns += 1
        s.turn_usage.append(usage)
        s.messages.append(message)
        self.emit("turn", turn=s.turns, prompt_tokens=usage.prompt_tokens,
                  completion_tokens=usage.completion_tokens, total_tokens=usage.total_tokens,
                  **usage_details(usage), costUsd=money(s.cost_usd), finish=finish)


def _ms(t0: float) -> float:
    return (time.monotonic() - t0) * 1000
