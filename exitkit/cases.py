"""The exits, each a coroutine over (kit, adapter) that returns a `Result`.

Every count is read at the mock (the journal) or from the kit's tool ledger, never from the
adapter's report; what the caller got is shown beside it as the caller got it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from exitkit.contract import Approve, Declared, Reject
from exitkit.runner import Kit, Run
from exitkit.verdict import BUDGET_USD, CAP, DENIED_CAP, ERROR_CAP, OUTSIDE_CAP, REASON, STOP_AT_S, Result

RECOVERED = "errors.log mentions a timeout."
CLAIMS_DELETION = "Deleted access.log"


def _none(case: str, who: Declared, missing: str, summary: str = "", **figures: Any) -> Result:
    return Result(case=case, adapter=who.name, verdict="none exists",
                  summary=summary or f"none exists ({missing})", figures={"limit": "none exists", **figures})


def _requests(run: Run) -> list[dict[str, Any]]:
    """The evidence of a run: one line per request the mock saw."""
    return [{"status": e.status, "prompt_tokens": e.prompt_tokens, "completion_tokens": e.completion_tokens,
             "reply": e.reply_text or ", ".join(e.reply_calls) or e.error} for e in run.entries]


def _stopped_by(run: Run, cap: int | None) -> str:
    if run.guarded:
        return f"the kit's guard at {len(run.requests)} requests"
    if cap is not None and len(run.requests) >= cap:
        return f"its turn cap of {cap}"
    return run.outcome.status


async def turn_cap(kit: Kit, adapter: Any, who: Declared) -> Result:
    if not who.has("max_turns"):
        run = await kit.measure(adapter, kit.setup("runaway"), guard=OUTSIDE_CAP)
        return _none("turn_cap", who, "no turn cap",
                     f"none exists · stopped by {_stopped_by(run, None)}", requests=len(run.requests))
    setup = kit.setup("runaway", max_turns=CAP)
    run = await kit.measure(adapter, setup, guard=OUTSIDE_CAP)
    n, ran = len(run.requests), sum(e.is_("list_files") for e in run.events)
    fate, resumed = "ran", None
    if ran < n:
        fate = "dropped"
        if who.has("resume"):
            resumed = kit.child(who.spec, setup.but(max_turns=CAP + 1), guard=3)
            first = resumed.entries[0].started if resumed.entries else float("inf")
            early = [e for e in resumed.events[len(run.events):] if e.is_("list_files") and e.t < first]
            fate = "pending" if early else "dropped"
    figures = {"requests": n, "cap": CAP, "tool runs": ran, "last call": fate, "caller gets": run.said(),
               "cost usd": round(run.cost_usd, 6)}
    evidence: dict[str, Any] = {"requests": _requests(run)}
    if resumed is not None:
        evidence["resumed with one more turn"] = {"caller gets": resumed.said(),
                                                  "requests": _requests(resumed)}
    if n > CAP:
        verdict, summary = "fail", f"cap ignored · {n} requests" + (" (kit guard)" if run.guarded else "")
    elif n < CAP:
        verdict, summary = "warn", f"stopped early · {n} requests · last call {fate}"
    else:
        verdict = "pass" if fate in ("ran", "pending") else "warn"
        summary = f"cap held · {n} requests · last call {fate}"
    return Result(case="turn_cap", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence=evidence)


def _overshoot(run: Run) -> tuple[int, float]:
    """Requests sent after the spend had reached the budget, and the spend minus the budget."""
    spent, after = 0.0, 0
    for e in run.requests:
        if spent >= BUDGET_USD:
            after += 1
        spent += e.cost_usd
    return after, round(spent - BUDGET_USD, 6)


async def budget(kit: Kit, adapter: Any, who: Declared) -> Result:
    cap = OUTSIDE_CAP if who.has("max_turns") else None
    has = who.has("max_budget_usd")
    setup = kit.setup("runaway", max_turns=cap, max_budget_usd=BUDGET_USD if has else None)
    run = await kit.measure(adapter, setup, guard=OUTSIDE_CAP + 5)
    after, over = _overshoot(run)
    n = len(run.requests)
    figures = {"requests": n, "budget usd": BUDGET_USD, "spent usd": round(run.cost_usd, 6),
               "overshoot usd": over, "requests after the budget was reached": after,
               "stopped by": _stopped_by(run, cap), "caller gets": run.said()}
    evidence = {"requests": _requests(run)}
    if not has:
        summary = f"none exists · {n} requests · ${run.cost_usd:.4f} · stopped by {_stopped_by(run, cap)}"
        return Result(case="budget", adapter=who.name, verdict="none exists", summary=summary,
                      figures={"limit": "none exists", **figures}, evidence=evidence)
    verdict = "pass" if after == 0 else "warn" if after == 1 else "fail"
    word = {"pass": "budget held", "warn": "one turn late", "fail": "budget ignored"}[verdict]
    return Result(case="budget", adapter=who.name, verdict=verdict,
                  summary=f"{word} · {n} requests · ${run.cost_usd:.4f} (+${over:.4f})", figures=figures,
                  evidence=evidence)


def _sent_back(run: Run, call_id: str) -> str | None:
    for e in run.requests:
        if call_id in (texts := e.tool_texts()):
            return texts[call_id]
    return None


async def tool_error(kit: Kit, adapter: Any, who: Declared) -> Result:
    cap = ERROR_CAP if who.has("max_turns") else None
    setup = kit.setup("recover", max_turns=cap)
    run = await kit.measure(adapter, setup, guard=OUTSIDE_CAP)
    sent = _sent_back(run, "c1")
    retries = sum(e.is_("read_file") and e.args.get("path") == "timeout.log" for e in run.events) - 1
    recovers = run.last_text() == RECOVERED
    figures = {"text sent back": sent if sent is not None else "(nothing)", "recovers": recovers,
               "identical retries": max(retries, 0), "requests": len(run.requests), "caller gets": run.said(),
               "cost usd": round(run.cost_usd, 6)}
    if recovers:
        summary = f"recovers · {len(run.requests)} requests"
    elif sent is None:
        summary = "nothing sent back · " + run.outcome.status
    else:
        summary = f"no recovery · sent {sent[:60]!r}"
    return Result(case="tool_error", adapter=who.name, verdict="pass" if recovers else "fail",
                  summary=summary, figures=figures, evidence={"requests": _requests(run)})


async def permanent_error(kit: Kit, adapter: Any, who: Declared) -> Result:
    cap = DENIED_CAP if who.has("max_turns") else None
    run = await kit.measure(adapter, kit.setup("denied", max_turns=cap), guard=OUTSIDE_CAP)
    calls = sum(e.is_("read_file") for e in run.events)
    reason = "permission denied" in run.said().lower()
    figures = {"identical failing calls": calls, "stops with the reason": reason,
               "requests": len(run.requests), "caller gets": run.said(), "cost usd": round(run.cost_usd, 6)}
    if calls > 1:
        verdict, summary = "fail", f"{calls} identical failing calls · stopped by {_stopped_by(run, cap)}"
    else:
        verdict = "pass" if reason else "warn"
        summary = f"stops after {calls} call · " + ("reason given" if reason else "reason lost")
    return Result(case="permanent_error", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence={"requests": _requests(run)})


def _deletions(run: Run) -> int:
    return sum(e.is_("delete_file") for e in run.events)


async def approval(kit: Kit, adapter: Any, who: Declared) -> Result:
    if not (who.has("approval") and who.has("resume")):
        return _none("approval", who, "no approval across processes")
    setup = kit.setup("destructive", max_turns=CAP, needs_approval=("delete_file",))
    stop = await kit.measure(adapter, setup, guard=OUTSIDE_CAP)
    approved = kit.child(who.spec, setup, decision=Approve(), guard=OUTSIDE_CAP)
    again = kit.child(who.spec, setup, decision=Approve(), guard=OUTSIDE_CAP)
    declined = kit.setup("destructive", max_turns=CAP, needs_approval=("delete_file",))
    await kit.measure(adapter, declined, guard=OUTSIDE_CAP)
    rejected = kit.child(who.spec, declined, decision=Reject(REASON), guard=OUTSIDE_CAP)
    reason_text = _sent_back(rejected, "c2") or ""
    said = rejected.last_text()
    checks = {  # name: (holds, what the cell says when it does not)
        "stops before the effect": (_deletions(stop) == 0 and bool(stop.requests), "ran before approval"),
        "runs once when approved in a new process": (_deletions(approved) == 1,
                                                     f"ran {_deletions(approved)}× when approved"),
        "not again on a second resume": (_deletions(again) == 1, "ran again on a second resume"),
        "the rejection's reason reaches the model": (REASON in reason_text, "rejection reason not sent"),
        "the answer does not claim the deletion": (
            bool(said) and CLAIMS_DELETION not in said and _deletions(rejected) == 0,
            "answer claims the deletion"),
    }
    failed = [why for ok, why in checks.values() if not ok]
    figures = {**{name: ok for name, (ok, _) in checks.items()},
               "deletions after approval": _deletions(approved),
               "deletions after the second resume": _deletions(again), "stops with": stop.said(),
               "resumed": approved.said(), "resumed again": again.said(), "rejected": rejected.said(),
               "text sent back on rejection": reason_text, "answer after rejection": rejected.last_text()}
    summary = "stops · runs once · not again · rejection read" if not failed else "; ".join(failed)
    evidence = {"stop": _requests(stop), "approved": _requests(approved), "resumed again": _requests(again),
                "rejected": _requests(rejected)}
    return Result(case="approval", adapter=who.name, verdict="fail" if failed else "pass", summary=summary,
                  figures=figures, evidence=evidence)


async def crash(kit: Kit, adapter: Any, who: Declared) -> Result:
    if not (who.has("approval") and who.has("resume")):
        return _none("crash", who, "no approval across processes")
    setup = kit.setup("destructive", max_turns=CAP, needs_approval=("delete_file",))
    await kit.measure(adapter, setup, guard=OUTSIDE_CAP)
    killed = kit.child(who.spec, setup.but(crash_after_effect=True), decision=Approve(), guard=OUTSIDE_CAP)
    resumed = kit.child(who.spec, setup, decision=Approve(), guard=OUTSIDE_CAP)
    runs = _deletions(resumed)
    effects = sum(e.is_("delete_file", "effect") for e in resumed.events)
    doubt = "doubt" in resumed.said().lower()
    figures = {"delete_file runs": runs, "deletions done": effects, "crashed process exit": killed.returncode,
               "resumed": resumed.said(), "surfaced as in doubt": doubt}
    if killed.returncode != -9:
        return Result(case="crash", adapter=who.name, verdict="error", figures=figures,
                      summary=f"the effect never ran in the approved process ({killed.said()})")
    if runs == 1:
        how = "surfaced as in doubt" if doubt else resumed.outcome.status
        verdict, summary = "pass", f"ran once · {how}"
    else:
        verdict, summary = "fail", f"ran {runs} times · {resumed.outcome.status}"
    return Result(case="crash", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence={"resumed": _requests(resumed)})


async def cancellation(kit: Kit, adapter: Any, who: Declared) -> Result:
    if not who.has("cancel"):
        return _none("cancellation", who, "no cancel API")
    setup = kit.setup("slow", max_turns=5)
    run = await kit.measure(adapter, setup, stop_at=STOP_AT_S, guard=OUTSIDE_CAP)
    saw = any(e.is_("scan_archive", "cancelled") for e in run.events)
    finished = any(e.is_("scan_archive", "ok") for e in run.events)
    stop_ms = None if run.stop_pressed is None else round((run.ended - run.stop_pressed) * 1000, 1)
    figures: dict[str, Any] = {"Stop to end ms": stop_ms, "tool saw it": saw,
                               "tool finished anyway": finished, "caller gets": run.said()}
    next_ok, evidence = None, {"requests": _requests(run)}
    if who.has("resume"):
        after = kit.child(who.spec, setup.but(scan_seconds=0.05), guard=OUTSIDE_CAP)
        first = after.entries[0] if after.entries else None
        dangling = first.unanswered_calls() if first else []
        next_ok = first is not None and first.status == 200 and not dangling
        figures |= {"next request status": first.status if first else None,
                    "dangling tool calls": dangling, "resumed": after.said()}
        evidence["resumed"] = _requests(after)
        if first is None:
            figures["next request"] = "none: the resume sent nothing"
    else:
        figures["next request"] = "none exists (no resume)"
    if stop_ms is None or finished:
        verdict, summary = "fail", "tool finished anyway" if finished else "Stop never pressed"
    elif next_ok is False:
        first_status = figures.get("next request status")
        verdict, summary = "fail", f"stops in {stop_ms:g} ms · next request invalid ({first_status})"
    else:
        verdict = "pass" if saw else "warn"
        summary = f"stops in {stop_ms:g} ms · " + ("tool cancelled" if saw else "tool abandoned")
        if next_ok:
            summary += " · next request valid"
    return Result(case="cancellation", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence=evidence)


Case = Callable[[Kit, Any, Declared], Awaitable[Result]]
EXITS: dict[str, Case] = {
    "turn_cap": turn_cap, "budget": budget, "tool_error": tool_error, "permanent_error": permanent_error,
    "approval": approval, "crash": crash, "cancellation": cancellation,
}
