"""A person's verdict on a stopped call: `approve` or `reject`, recorded in the run state.

Neither function runs anything; the next `run()` continues from the transcript, the same code
path as any resume. A rejection is written into the transcript *in words*, under the call's
own `tool_call_id`, because that slot is where the model looks for what happened — an empty
rejection (allowed only with `unsafe_empty=True`) is how an agent ends up reporting a deletion
that never took place.
"""

from __future__ import annotations

from harness.state import Approval, Approved, Rejection, RunState, args_digest, pending


def _target(state: RunState, call_id: str | None) -> dict:
    calls = {c["id"]: c for c in pending(state)}
    if call_id is None:
        if not isinstance(state.interruption, Approval):
            raise ValueError(
                f"run {state.run_id} is not waiting for an approval "
                f"(status {state.status}); name the call id"
            )
        call_id = state.interruption.call_id
    if call_id not in calls:
        raise ValueError(
            f"call {call_id!r} is not pending in run {state.run_id}; pending: {', '.join(calls) or 'none'}"
        )
    return calls[call_id]


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
    call = _target(state, call_id)
    text = f"Rejected by the user: {reason.strip()}" if reason.strip() else ""
    state.messages.append(
        {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"], "content": text}
    )
    state.rejections.append(Rejection(call_id=call["id"], reason=reason))
    state.approved = [a for a in state.approved if a.call_id != call["id"]]
    state.intents.pop(call["id"], None)
    return call["id"]
