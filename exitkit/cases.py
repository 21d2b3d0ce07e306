"""The exits, each a function over (kit, adapter) that returns a `Result`; every run in a new process.

Every count is read at the mock (the journal) or from the kit's tool ledger, never from the
adapter's report; what the caller got is shown beside it as the caller got it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exitkit.contract import Approve, Declared, Reject
from exitkit.mcp import cancel_reached
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


def _transcript(run: Run) -> str:
    """Whether the caller got the conversation so far back, as the framework's API handed it."""
    n = run.outcome.transcript_messages
    return "transcript not returned" if n is None else f"transcript returned ({n} messages)"


def turn_cap(kit: Kit, who: Declared) -> Result:
    if not who.has("max_turns"):
        run = kit.measure(who.spec, kit.setup("runaway"), guard=OUTSIDE_CAP)
        return _none("turn_cap", who, "no turn cap",
                     f"none exists · stopped by {_stopped_by(run, None)} · {_transcript(run)}",
                     requests=len(run.requests),
                     **{"transcript messages": run.outcome.transcript_messages})
    setup = kit.setup("runaway", max_turns=CAP)
    run = kit.measure(who.spec, setup, guard=OUTSIDE_CAP)
    n, ran = len(run.requests), sum(e.is_("list_files") for e in run.events)
    fate, resumed = ("ran" if n else "none: no request"), None
    if n > CAP:  # past the cap, the last call within it is the cap-th reply's: it ran if CAP tools did
        fate = "ran" if ran >= CAP else "dropped"
    elif ran < n:
        fate = "dropped"
        if who.has("resume"):
            resumed = kit.child(who.spec, setup.but(max_turns=CAP + 1), guard=3)
            first = resumed.entries[0].started if resumed.entries else float("inf")
            early = [e for e in resumed.events[len(run.events):] if e.is_("list_files") and e.t < first]
            fate = "pending" if early else "dropped"
    figures = {"requests": n, "cap": CAP, "tool runs": ran, "last call": fate, "caller gets": run.said(),
               "transcript messages": run.outcome.transcript_messages, "cost usd": run.cost_or_unknown}
    evidence: dict[str, Any] = {"requests": _requests(run)}
    if resumed is not None:
        evidence["resumed with one more turn"] = {"caller gets": resumed.said(),
                                                  "requests": _requests(resumed)}
    if n > CAP:
        verdict, summary = "fail", f"over the cap by {n - CAP} · {n} requests"
        if run.guarded:
            summary = f"cap ignored · {n} requests (kit guard)"
    elif n < CAP:
        verdict, summary = "warn", f"stopped early · {n} requests · last call {fate}"
    else:
        verdict = "pass" if fate in ("ran", "pending") else "warn"
        summary = f"cap held · {n} requests · last call {fate}"
    summary = f"{summary} · {_transcript(run)}"
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


def in_reach(costs: list[float], budget_usd: float) -> bool:
    """Whether a run whose requests cost `costs` stopped with its budget in reach: its next request
    would have crossed it, priced as the last one plus the growth since the one before (a prompt
    that grows by a turn each request: what a budget checked before each call predicts)."""
    if not costs:
        return False
    growth = costs[-1] - costs[-2] if len(costs) > 1 else 0.0
    return sum(costs) + costs[-1] + max(growth, 0.0) >= budget_usd


def budget(kit: Kit, who: Declared) -> Result:
    cap = OUTSIDE_CAP if who.has("max_turns") else None
    has = who.has("max_budget_usd")
    setup = kit.setup("runaway", max_turns=cap, max_budget_usd=BUDGET_USD if has else None)
    run = kit.measure(who.spec, setup, guard=OUTSIDE_CAP + 5)
    # A budget's verdict rests on the spend, so unknown usage is an error there; without one it is a figure.
    spent = run.cost_usd if has else run.cost_or_unknown
    after, over = _overshoot(run) if spent is not None else (None, None)
    n = len(run.requests)
    figures = {"requests": n, "budget usd": BUDGET_USD,
               "spent usd": None if spent is None else round(spent, 6),
               "overshoot usd": over, "requests after the budget was reached": after,
               "stopped by": _stopped_by(run, cap), "caller gets": run.said()}
    evidence = {"requests": _requests(run)}
    if not has:
        money = "spend unknown (replies without usage)" if spent is None else f"${spent:.4f}"
        summary = f"none exists · {n} requests · {money} · stopped by {_stopped_by(run, cap)}"
        return Result(case="budget", adapter=who.name, verdict="none exists", summary=summary,
                      figures={"limit": "none exists", **figures}, evidence=evidence)
    # Stopped before the budget was in reach: the budget stopped nothing, so nothing shows it held.
    if not in_reach([e.cost_usd for e in run.requests], BUDGET_USD):
        return Result(case="budget", adapter=who.name, verdict="warn",
                      summary=f"stopped before the budget · {n} requests · ${spent:.4f} · stopped by "
                              f"{_stopped_by(run, cap)}", figures=figures, evidence=evidence)
    verdict = "pass" if after == 0 else "warn" if after == 1 else "fail"
    word = {"pass": "budget held", "warn": "one turn late", "fail": "budget ignored"}[verdict]
    return Result(case="budget", adapter=who.name, verdict=verdict,
                  summary=f"{word} · {n} requests · ${spent:.4f} (+${over:.4f})", figures=figures,
                  evidence=evidence)


def _sent_back(run: Run, tool: str) -> str | None:
    """The text first sent back for a call of `tool`, under whatever id the agent gave the call."""
    return next((texts[0] for e in run.requests if (texts := e.answered(tool))), None)


def _next_carrying(run: Run, text: str, after: float) -> tuple[str, str] | None:
    """The message of the first request sent after `after` (a time) that carries `text`, as (its
    role, its text), in whatever message the agent put it."""
    following = next((e for e in run.requests if e.started >= after), None)
    return following.carrying(text) if following is not None and text else None


def tool_error(kit: Kit, who: Declared) -> Result:
    cap = ERROR_CAP if who.has("max_turns") else None
    setup = kit.setup("recover", max_turns=cap)
    run = kit.measure(who.spec, setup, guard=OUTSIDE_CAP)
    error = next((e for e in run.events if e.is_("read_file", "error")), None)
    found = _next_carrying(run, error.detail, error.t) if error is not None else None
    sent = found[1] if found else _sent_back(run, "read_file")
    retries = sum(e.is_("read_file") and e.args.get("path") == "timeout.log" for e in run.events) - 1
    recovers, n = run.last_text() == RECOVERED, len(run.requests)
    figures = {"text sent back": sent if sent is not None else "(nothing)", "sent as": found and found[0],
               "recovers": recovers, "identical retries": max(retries, 0), "requests": n,
               "caller gets": run.said(), "cost usd": run.cost_or_unknown}
    if recovers:
        summary = f"recovers · {n} requests"
    elif found:  # the sentence reached the model; the mock's script reads tool messages only
        summary = f"error sent back as {found[0]} text · {n} requests"
    elif sent is None:
        summary = "nothing sent back · " + run.outcome.status
    else:
        summary = f"no recovery · sent {sent[:60]!r}"
    return Result(case="tool_error", adapter=who.name, verdict="pass" if recovers or found else "fail",
                  summary=summary, figures=figures, evidence={"requests": _requests(run)})


def _answered(run: Run, tool: str) -> int:
    """The most calls of `tool` any request shows answered: what the model was told, whether the
    tool ran for each or an agent answered from a cache of its own."""
    return max((len(e.answered(tool)) for e in run.requests), default=0)


def permanent_error(kit: Kit, who: Declared) -> Result:
    cap = DENIED_CAP if who.has("max_turns") else None
    run = kit.measure(who.spec, kit.setup("denied", max_turns=cap), guard=OUTSIDE_CAP)
    calls = max(sum(e.is_("read_file") for e in run.events), _answered(run, "read_file"))
    reason = "permission denied" in run.said().lower()
    figures = {"identical failing calls": calls, "stops with the reason": reason,
               "requests": len(run.requests), "caller gets": run.said(), "cost usd": run.cost_or_unknown}
    if calls > 1:
        verdict, summary = "fail", f"{calls} identical failing calls · stopped by {_stopped_by(run, cap)}"
    elif calls == 0:  # a reason the tool never gave is not the tool's reason
        verdict, summary = "fail", f"the call never ran · {len(run.requests)} requests"
    else:
        verdict = "pass" if reason else "warn"
        summary = f"stops after {calls} call · " + ("reason given" if reason else "reason lost")
    return Result(case="permanent_error", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence={"requests": _requests(run)})


def _deletions(run: Run) -> int:
    return sum(e.is_("delete_file") for e in run.events)


def _approval_checks(stop: Run, approved: Run, again: Run, rejected: Run,
                     reason_text: str) -> dict[str, tuple[bool, str]]:
    """Each criterion: whether it holds, and what the cell says when it does not."""
    before, once, ever = _deletions(stop), _deletions(approved), _deletions(again)
    asked = any("delete_file" in e.reply_calls for e in stop.requests)
    stops = ("ran before approval" if before else "no request before approval" if not stop.requests
             else "" if asked else "never asked for the deletion")
    said = rejected.last_text()
    answer = ("deleted though rejected" if _deletions(rejected) else "no answer after rejection" if not said
              else "answer claims the deletion" if CLAIMS_DELETION in said else "")
    return {
        "stops before the effect": (not stops, stops),
        "runs once when approved in a new process": (
            once == 1, "never ran when approved" if once == 0 else f"ran {once}× when approved"),
        "not again on a second resume": (
            ever == once, "ran again on a second resume" if once else "ran only on a second resume"),
        "the rejection's reason reaches the model": (REASON in reason_text, "rejection reason not sent"),
        "the answer does not claim the deletion": (not answer, answer),
    }


def approval(kit: Kit, who: Declared) -> Result:
    if not (who.has("approval") and who.has("resume")):
        return _none("approval", who, "no approval across processes")
    setup = kit.setup("destructive", max_turns=CAP, needs_approval=("delete_file",))
    stop = kit.measure(who.spec, setup, guard=OUTSIDE_CAP)
    approved = kit.child(who.spec, setup, decision=Approve(), guard=OUTSIDE_CAP)
    again = kit.child(who.spec, setup, decision=Approve(), guard=OUTSIDE_CAP)
    declined = kit.setup("destructive", max_turns=CAP, needs_approval=("delete_file",))
    kit.measure(who.spec, declined, guard=OUTSIDE_CAP)
    rejected = kit.child(who.spec, declined, decision=Reject(REASON), guard=OUTSIDE_CAP)
    found = rejected.requests[0].carrying(REASON) if rejected.requests else None
    reason_text = found[1] if found else _sent_back(rejected, "delete_file") or ""
    checks = _approval_checks(stop, approved, again, rejected, reason_text)
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


def crash(kit: Kit, who: Declared) -> Result:
    if not (who.has("approval") and who.has("resume")):
        return _none("crash", who, "no approval across processes")
    setup = kit.setup("destructive", max_turns=CAP, needs_approval=("delete_file",))
    kit.measure(who.spec, setup, guard=OUTSIDE_CAP)
    killed = kit.child(who.spec, setup.but(crash_after_effect=True), decision=Approve(), guard=OUTSIDE_CAP)
    resumed = kit.child(who.spec, setup, decision=Approve(), guard=OUTSIDE_CAP)
    runs = _deletions(resumed)
    effects = sum(e.is_("delete_file", "effect") for e in resumed.events)
    doubt = "doubt" in resumed.said().lower()
    finished = bool(resumed.last_text())  # the mock gave the resumed run a final answer
    figures = {"delete_file runs": runs, "deletions done": effects, "crashed process exit": killed.returncode,
               "resumed": resumed.said(), "surfaced as in doubt": doubt, "finished": finished}
    if killed.returncode != -9:
        return Result(case="crash", adapter=who.name, verdict="error", figures=figures,
                      summary=f"the effect never ran in the approved process ({killed.said()})")
    if runs == 1 and not (doubt or finished):  # not run twice, but the run is lost without a word
        verdict, summary = "warn", f"ran once · lost: {resumed.outcome.status}"
    elif runs == 1:
        how = "surfaced as in doubt" if doubt else resumed.outcome.status
        verdict, summary = "pass", f"ran once · {how}"
    else:
        verdict, summary = "fail", f"ran {runs} times · {resumed.outcome.status}"
    return Result(case="crash", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence={"resumed": _requests(resumed)})


def cancellation(kit: Kit, who: Declared) -> Result:
    if not who.has("cancel"):
        return _none("cancellation", who, "no cancel API")
    setup = kit.setup("slow", max_turns=5)
    run = kit.measure(who.spec, setup, stop=("scan_archive", STOP_AT_S), guard=OUTSIDE_CAP)
    saw = any(e.is_("scan_archive", "cancelled") for e in run.events)
    finished = any(e.is_("scan_archive", "ok") for e in run.events)
    stop_ms = None if run.stop_pressed is None else round((run.ended - run.stop_pressed) * 1000, 1)
    ran_on = len(run.after_stop())
    figures: dict[str, Any] = {"Stop to end ms": stop_ms, "tool saw it": saw,
                               "tool finished anyway": finished, "requests after Stop": ran_on,
                               "left running after the run": run.left_running, "caller gets": run.said(),
                               # over MCP: what carried Stop to the tool (null: the tools were wrapped)
                               "cancel reached the tool": cancel_reached(run.events, "scan_archive")}
    next_ok, silent, evidence = None, False, {"requests": _requests(run)}
    if who.has("resume"):
        after = kit.child(who.spec, setup.but(scan_seconds=0.05), guard=OUTSIDE_CAP)
        first = after.entries[0] if after.entries else None
        dangling = first.unanswered_calls() if first else []
        # No request after the resume leaves nothing to judge: not invalid, but the history is untested.
        next_ok, silent = (None, True) if first is None else (first.status == 200 and not dangling, False)
        figures |= {"next request status": first.status if first else None,
                    "dangling tool calls": dangling, "resumed": after.said()}
        evidence["resumed"] = _requests(after)
        if first is None:
            figures["next request"] = "none: the resume sent nothing"
    else:
        figures["next request"] = "none exists (no resume)"
    if run.outcome.status == "kit timeout":  # killed by the kit: it never stopped, however long it took
        after = " after Stop" if stop_ms is not None else ""
        verdict, summary = "fail", f"never returned{after} · kit timeout ({run.outcome.error})"
    elif stop_ms is None or finished:
        verdict, summary = "fail", "tool finished anyway" if finished else "Stop never pressed"
    elif ran_on:
        verdict, summary = "fail", f"ran on after Stop · {ran_on} requests · ended {stop_ms:g} ms after it"
    elif stop_ms > (setup.scan_seconds - STOP_AT_S) * 1000:
        verdict, summary = "fail", f"stops too late · {stop_ms:g} ms, after the tool would have finished"
    elif next_ok is False:
        first_status = figures.get("next request status")
        verdict, summary = "fail", f"stops in {stop_ms:g} ms · next request invalid ({first_status})"
    else:
        verdict = "pass" if saw and not silent else "warn"
        summary = f"stops in {stop_ms:g} ms · " + ("tool cancelled" if saw else "tool abandoned")
        if next_ok:
            summary += " · next request valid"
        if silent:
            summary += " · the resume sent no request"
    return Result(case="cancellation", adapter=who.name, verdict=verdict, summary=summary, figures=figures,
                  evidence=evidence)


Case = Callable[[Kit, Declared], Result]
EXITS: dict[str, Case] = {
    "turn_cap": turn_cap, "budget": budget, "tool_error": tool_error, "permanent_error": permanent_error,
    "approval": approval, "crash": crash, "cancellation": cancellation,
}
