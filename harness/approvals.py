"""A person's verdict on a stopped call: `approve` or `reject`, recorded in the run state.

Decisions are compare-and-set: a call that already has one (an approval that still matches
it, or an answer in the transcript) is refused with `DecisionLost`, saying why. Neither
function runs anything; the next `run()` continues from the transcript, the same code
path as any resume. A rejection is written into the transcript *in words*, under the call's
own `tool_call_id`, because that slot is where the model looks for what happened — an empty
rejection (allowed only with `unsafe_empty=True`) is how an agent ends up reporting a deletion
that never took place.
"""

from __future__ import annotations

import time
from typing import Literal

from harness.state import Approval, Approved, Rejection, RunState, args_digest, is_approved, pending

MAX_REASON_CHARS = 10_000
"""The longest rejection reason, in characters, from the CLI, the browser page or Python alike: it
goes into the transcript, and the model reads (and is billed for) every word of it."""


class DecisionLost(ValueError):
    """The call already has a decision (an approval, or an answer in the transcript): a second
    verdict would contradict what was recorded, or what already happened on disk."""


def _lost(state: RunState, call_id: str) -> str | None:
    """Why a decision on `call_id` comes too late, if it does."""
    rejected = {r.call_id: r.reason for r in state.rejections}
    answered = any(m.get("role") == "tool" and m.get("tool_call_id") == call_id for m in state.messages)
    if answered and call_id in rejected:
        why = f"was already rejected ({rejected[call_id]!r})"
    elif answered:
        why = "already has a result (it was approved and ran, or was answered otherwise)"
    else:
        return None
    return f"call {call_id!r} of run {state.run_id} {why}; this decision lost and changed nothing"


def _target(state: RunState, call_id: str | None) -> dict:
    calls = {c["id"]: c for c in pending(state)}
    if call_id is None:
        if not isinstance(state.interruption, Approval):
            raise ValueError(
                f"run {state.run_id} is not waiting for an approval "
                f"(status {state.status}); name the call id"
            )
        call_id = state.interruption.call_id
    if call_id not in calls and (why := _lost(state, call_id)):
        raise DecisionLost(why)
    if call_id not in calls:
        raise ValueError(
            f"call {call_id!r} is not pending in run {state.run_id}; pending: {', '.join(calls) or 'none'}"
        )
    call = calls[call_id]
    if is_approved(state, call):
        raise DecisionLost(
            f"call {call_id!r} of run {state.run_id} is already approved as it reads now; "
            "this decision lost and changed nothing"
        )
    return call


def approve(state: RunState, call_id: str | None = None) -> str:
    """Allow the pending call (default: the one the run stopped for); returns its id.

    The approval is bound to the call as it reads now (its tool and a digest of its arguments):
    if the saved call is changed afterwards, the approval no longer applies and the run stops
    for a fresh decision. Approving a call marked in doubt drops its write-ahead intent: the
    person has decided the earlier attempt did not happen, so the next run executes it again.
    """
    call = _target(state, call_id)
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    state.approved = [a for a in state.approved if a.call_id != call["id"]]
    state.approved.append(Approved(call_id=call["id"], tool_name=name, digest=args_digest(name, arguments)))
    state.intents.pop(call["id"], None)
    return call["id"]


def reject(
    state: RunState, call_id: str | None = None, *, reason: str, unsafe_empty: bool = False
) -> str:
    """Refuse the pending call and tell the model so, in words; returns its id."""
    if not reason.strip() and not unsafe_empty:
        raise ValueError(
            "a rejection needs a reason the model can read; an empty one makes the agent "
            "report work that never happened (pass unsafe_empty=True to demonstrate that)"
        )
    if len(reason) > MAX_REASON_CHARS:
        raise ValueError(f"a rejection reason may be at most {MAX_REASON_CHARS:,} characters; "
                         f"this one has {len(reason):,}")
    call = _target(state, call_id)
    text = f"Rejected by the user: {reason.strip()}" if reason.strip() else ""
    state.messages.append(
        {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": text}
    )
    state.rejections.append(Rejection(call_id=call["id"], reason=reason))
    state.approved = [a for a in state.approved if a.call_id != call["id"]]
    state.intents.pop(call["id"], None)
    return call["id"]


def decide(
    state: RunState, verdict: Literal["approved", "rejected"], call_id: str | None = None, *, by: str,
    reason: str | None = None, unsafe_empty: bool = False,
) -> str:
    """`approve` or `reject`, then record who decided in `state.meta["last_decision"]`, which the
    CLI and the browser page show to a decision that arrives later and loses."""
    if verdict == "approved":
        call_id = approve(state, call_id)
    else:
        call_id = reject(state, call_id, reason=reason, unsafe_empty=unsafe_empty)
    state.meta["last_decision"] = {"call_id": call_id, "verdict": verdict, "by": by,
                                   "at": round(time.time(), 3)}
    return call_id
