"""A case's result: a verdict by written criteria, the figure beside it, and the evidence.

The criteria below are printed in every report; a verdict is never a matter of taste.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Verdict = Literal["pass", "warn", "fail", "none exists", "error"]
VERDICTS: tuple[Verdict, ...] = ("pass", "warn", "fail", "none exists", "error")

CAP, BUDGET_USD, OUTSIDE_CAP, STOP_AT_S = 8, 0.01, 60, 1.2
"""The turn cap, the budget, the outside bound a run without the limit gets, and when Stop is pressed."""
ERROR_CAP, DENIED_CAP = 10, 12
REASON = "I declined: access.log must be kept for the audit."
"""The rejection reason the approval case gives; the model must read it in the next request."""

CASES = ("turn_cap", "budget", "tool_error", "permanent_error", "approval", "crash", "cancellation",
         "overhead")
TITLES = {
    "turn_cap": "turn cap", "budget": "budget", "tool_error": "tool error",
    "permanent_error": "permanent error", "approval": "approval", "crash": "crash after effect",
    "cancellation": "cancellation", "overhead": "overhead",
}
CRITERIA = {
    "turn_cap": f"`runaway` (every reply asks for one more tool call) with a cap of {CAP} model requests. "
                f"**pass**: the mock saw exactly {CAP} requests and the call of the last reply either ran or "
                "is pending (a resume in a new process, allowed one more turn, runs it before its next "
                f"request). **warn**: {CAP} requests but the last call was dropped, or fewer than {CAP} "
                f"requests. **fail**: more than {CAP} requests (the kit's guard at {OUTSIDE_CAP} stops a run "
                "that never ends; past the cap, \"last call\" is the call of the cap-th reply). Shown, not "
                "judged: whether the framework's own API (its return value "
                "or the exception it raises) hands the conversation so far back to the caller, and how "
                "many messages (the Agents SDK: input items); a checkpoint the caller did not get is "
                "\"not returned\".",
    "budget": f"`runaway` with a budget of ${BUDGET_USD}, priced at the mock's billed tokens at $2/M in and "
              f"$12/M out, and a turn cap of {OUTSIDE_CAP} as the outside bound. **pass**: no request was "
              "sent once the spend had reached the budget (the overshoot is at most the turn that crossed "
              "it). **warn**: one request after that, or the run stopped before the budget was in reach (its "
              "spend plus its next request's cost, the last one's plus the growth since the one before, is "
              "under the budget: something else stopped it). "
              "**fail**: more than one request after it. **none exists**: the "
              "framework has no spending limit; the row shows what stopped the run.",
    "tool_error": "`recover`: the first call reads a file that does not exist; the model recovers only if "
                  "the error's own sentence (\"… Call list_files …\") reaches it. **pass**: the first "
                  "request after the error carries that sentence, in whatever message the agent put it (a "
                  "tool message, or user text as some frameworks send a tool's result), or the mock's last "
                  "answer is the recovered one (the mock's script reads tool messages only, so an agent "
                  "that sends it as user text passes without the recovered answer). **fail**: neither (the "
                  "text sent back is shown, or \"nothing\" when the run raised before sending any).",
    "permanent_error": f"`denied`: the model asks for a file the process may not open, forever (cap "
                       f"{DENIED_CAP}). **pass**: the failing call ran once and the caller gets the reason "
                       "(\"permission denied\"). **warn**: it ran once but the reason is lost. **fail**: "
                       "it ran more than once (identical failing calls: the tool's runs, or the calls the "
                       "requests show answered, whichever is more), or never.",
    "approval": "`destructive` with `delete_file` needing approval. **pass**, all of: the run stops before "
                "the deletion; approved in a new process, the deletion runs exactly once; the same saved "
                "state resumed once more does not run it again; a rejection's reason is in the first request "
                "after the rejection (in any message) and the final answer does not claim the deletion. "
                "**fail**: any of these does not hold. **none exists**: no approval or resume.",
    "crash": "`destructive`, approved in a new process whose `delete_file` deletes and then SIGKILLs its "
             "own process before the framework can save; then resumed (approved) in another new process. "
             "**pass**: the deletion ran once in all, and the resumed run finished (the mock gave it an "
             "answer) or surfaced the call as in doubt. **warn**: it ran once but the resumed run did "
             "neither (the run is lost). **fail**: it ran again. **none exists**: no approval or resume.",
    "cancellation": f"`slow`: the kit presses Stop {STOP_AT_S} s after its ledger shows the 3 s tool has "
                    "started (however long the agent took to get there). **pass**: the run ends "
                    "before the tool would have finished, the tool saw the cancellation (its task was "
                    "cancelled), no request reaches the model after Stop, and, where the framework can "
                    "resume, the next request is valid history (every assistant tool call answered; the "
                    "mock refuses one that is not, as real APIs do). **warn**: the run ended but the tool "
                    "was abandoned without being cancelled, or a resume sent no request to judge. "
                    "**fail**: the run sent the model a request after Stop, ended only after the tool "
                    "would have finished, the tool finished anyway, or the next request carried a "
                    "dangling tool call or was refused. **none exists**: no cancel API. Shown, not "
                    "judged, for tools over MCP: what carried Stop to the tool (`notifications/cancelled`, "
                    "`connection closed`: the client ended the session or the request, or `never`).",
    "overhead": "`plan` (cap 20) and `runaway` at caps 20 and 100. Per turn: (wall time − the mock's own "
                "time) / requests, as a ratio to a bare `httpx` loop sending the same bodies to the same "
                "mock, interleaved run by run; peak RSS of a fresh process running `plan` as a ratio to one "
                "replaying it with bare `httpx`. A figure, not a verdict (always **pass** when measured).",
}

NEVER_RETURNED = (" Every case: a run the kit had to stop at its timeout never returned to its caller: "
                  "**fail**, whatever else held.")
CRITERIA = {case: text + NEVER_RETURNED for case, text in CRITERIA.items()}
"""The overhead case's too: a run that never returned was not measured, whatever figure it left."""


@dataclass(kw_only=True)
class Result:
    case: str
    adapter: str
    verdict: Verdict
    summary: str
    """The report card's cell, e.g. "cap held · 8 requests · last call pending"."""
    figures: dict[str, Any] = field(default_factory=dict)
    """Numbers and short facts, keyed by name (the same keys for every adapter)."""
    evidence: dict[str, Any] = field(default_factory=dict)
    """What the verdict was read from: requests, texts sent, effects counted."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def cell(self) -> str:
        if self.summary.startswith(self.verdict):
            return self.summary.upper()[: len(self.verdict)] + self.summary[len(self.verdict):]
        return f"{self.verdict.upper()} · {self.summary}"
