"""The chapter's published figures, typed once: every experiment and the index read them here.

Source: "Build an agent harness: the loop and the five exits" (SPEC §3; `seeds/` holds the text).
Only what the chapter prints is here; what follows from it is derived in `profile.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PRICE_IN_PER_M = 2.00
PRICE_OUT_PER_M = 12.00
"""Dollars per million input / output tokens, the chapter's prices (and our default)."""


@dataclass(frozen=True, kw_only=True)
class Call:
    """A tool call as the chapter's scripted provider emits it (its `SCRIPTS`)."""

    id: str
    name: str
    args: dict[str, str]

    def wire(self) -> list[dict]:
        """The reply's `tool_calls` array as the wire carries it."""
        arguments = json.dumps(self.args, separators=(",", ":"))
        return [{"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}]


# The calls whose completion tokens the chapter prints or implies.
LIST_FILES = Call(id="c1", name="list_files", args={})
READ_ERRORS = Call(id="c2", name="read_file", args={"path": "errors.log"})
DELETE_ACCESS = Call(id="c2", name="delete_file", args={"path": "access.log"})
READ_TIMEOUT = Call(id="c1", name="read_file", args={"path": "timeout.log"})


@dataclass(frozen=True, kw_only=True)
class Plan:
    turns: int = 3
    tool_runs: int = 2
    input_tokens: int = 815
    output_tokens: int = 70
    cost_usd: float = 0.002470
    prompt_per_turn: tuple[int, ...] = (204, 269, 342)
    status: str = "completed"
    answer: str = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."


@dataclass(frozen=True, kw_only=True)
class TurnCap:
    input_by_cap: tuple[tuple[int, int], ...] = ((8, 3_431), (50, 88_649), (100, 337_299))
    cost_20_above_usd: float = 0.038
    """“Twenty turns on a short transcript cost above $0.038.”"""
    input_ratio_100_50: float = 3.8
    cost_ratio_100_50: float = 3.7


@dataclass(frozen=True, kw_only=True)
class Budget:
    budget_usd: float = 0.010
    spent_usd: float = 0.010780


@dataclass(frozen=True, kw_only=True)
class ToolErrors:
    answered: tuple[str, ...] = ("descriptive",)
    descriptive_vs_first: float = 4.7


@dataclass(frozen=True, kw_only=True)
class Denied:
    turns: int = 12
    tool_runs: int = 11
    input_tokens: int = 7_079
    cost_usd: float = 0.018622
    status: str = "max_turns_exceeded"
    answer: str = ""
    vs_recovered: float = 5.2


@dataclass(frozen=True, kw_only=True)
class Dedupe:
    extra_usd: float = 0.001050
    extra_pct: int = 75
    saved_tool_runs: int = 1
    saved_usd: float = 0.0


@dataclass(frozen=True, kw_only=True)
class DedupeWrites:
    naive: tuple[int, int, tuple[str, ...]] = (3, 1, ("access.log",))
    """(turns, tool runs, files deleted) with a cache on every tool."""
    gate: tuple[int, int, tuple[str, ...]] = (3, 2, ("access.log", "access.log"))


ANSWER_DELETED = "Deleted access.log to free space."
ANSWER_DECLINED = "I did not delete anything: you declined the deletion."


@dataclass(frozen=True, kw_only=True)
class Approval:
    stopped_at_turn: int = 2
    approved_turns: int = 3
    approved_deleted: tuple[str, ...] = ("access.log",)
    approved_answer: str = ANSWER_DELETED
    rejected_turns: int = 3
    rejected_answer: str = ANSWER_DECLINED


@dataclass(frozen=True, kw_only=True)
class Rejection:
    with_reason: str = ANSWER_DECLINED
    with_nothing: str = ANSWER_DELETED


@dataclass(frozen=True, kw_only=True)
class KillResume:
    restored_turns: int = 2
    restored_cost_usd: float = 0.001570
    restored_messages: int = 6
    resumed_turns: int = 3
    resumed_cost_usd: float = 0.002470
    tool_runs: tuple[str, ...] = ("list_files", "read_file:errors.log")


@dataclass(frozen=True, kw_only=True)
class Cancellation:
    progress_ms: tuple[tuple[str, int], ...] = (
        ("scanned 200 of 1200 files", 506),
        ("scanned 400 of 1200 files", 1_007),
    )
    uncancelled_ms: int = 3_015
    stop_at_s: float = 1.2
    stopped_ms: int = 1_202
    reason: str = "user pressed Stop"


TRACE_LINES = """\
{"runId":"n1","type":"turn","turn":1,"prompt_tokens":204,"completion_tokens":23,"total_tokens":227,"costUsd":0.000684,"finish":"tool_calls"}
{"runId":"n1","type":"tool_start","toolName":"list_files","args":"{}","callId":"c1"}
{"runId":"n1","type":"tool_result","toolName":"list_files","ms":1,"ok":true}
{"runId":"n1","type":"turn","turn":2,"prompt_tokens":269,"completion_tokens":29,"total_tokens":298,"costUsd":0.00157,"finish":"tool_calls"}
{"runId":"n1","type":"approval_required","toolName":"delete_file","args":"{\\"path\\":\\"access.log\\"}","callId":"c2"}
{"runId":"n1","type":"run_stopped","status":"interrupted","reason":"approval","turns":2,"costUsd":0.00157}"""


def trace_events() -> list[dict]:
    return [json.loads(line) for line in TRACE_LINES.splitlines()]


@dataclass(frozen=True, kw_only=True)
class Latency:
    harness_ms: int = 15
    """“The harness itself adds fifteen milliseconds to a three-turn run.”"""


@dataclass(frozen=True, kw_only=True)
class SubAgent:
    """The chapter's `research` tool: `limits: { maxTurns: 6, maxBudgetUsd: 0.05 }`."""

    max_turns: int = 6
    max_budget_usd: float = 0.05


@dataclass(frozen=True, kw_only=True)
class RealModel:
    """Qwen2.5-0.5B-Instruct on CPU: (turns, tool runs, wall ms, answer) per task."""

    tasks: tuple[tuple[str, tuple[int, int, int, str]], ...] = (
        ("Which file mentions a timeout?", (2, 1, 15_260, "The file timeout.txt does not exist...")),
        ("How many files are in the directory?", (2, 1, 13_037, "There are three files...")),
        ("Read notes.txt and tell me what it says.", (2, 1, 10_121, "Remember to rotate your logs.")),
        ("List the files and then read each one.", (2, 2, 21_290, "")),
        ("Which file is the largest?", (2, 1, 10_698, "The largest file is access.log.")),
        ("Is there a file about rotating logs?", (2, 1, 12_490, "")),
    )
    turns: int = 12
    tool_runs: int = 7
    wall_ms: int = 82_896
    mean_turn_ms: int = 6_908


PLAN = Plan()
TURN_CAP = TurnCap()
BUDGET = Budget()
TOOL_ERRORS = ToolErrors()
DENIED = Denied()
DEDUPE = Dedupe()
DEDUPE_WRITES = DedupeWrites()
APPROVAL = Approval()
REJECTION = Rejection()
KILL_RESUME = KillResume()
CANCELLATION = Cancellation()
LATENCY = Latency()
SUB_AGENT = SubAgent()
REAL_MODEL = RealModel()
