"""Each experiment rerun with its mechanism broken: the check that guards it must fail.

A check that passes whatever the harness does proves nothing; these run the real experiment
against the mock with one knob turned the wrong way and assert the named check turns false.
"""

from __future__ import annotations

from typing import Any

import pytest

from experiments import REGISTRY
from experiments.lab.runs import reject_with
from harness import MemoryTrace, Pricing

pytestmark = pytest.mark.slow


class _LosesRunId(MemoryTrace):
    """A trace sink that drops the run id: the one field that makes a trace a query."""

    def emit(self, event: dict[str, Any]) -> None:
        super().emit({k: v for k, v in event.items() if k != "runId"})


BROKEN = [
    ("plan", {"hidden_note": "Be brief."}, "each turn's prompt = our count of the transcript sent"),
    ("turn_cap", {"cap_slack": 1}, "every capped run stops max_turns_exceeded at its cap"),
    ("budget", {"soft_check": "after_call"}, "soft: turns and spend = what our profile predicts"),
    ("tool_errors", {"descriptive": "generic"}, "only the descriptive policy answers"),
    (
        "permanent_error",
        {"feed_back_permanent": True},
        "permanent error stops failed after one turn, saying why",
    ),
    ("dedupe", {"dedupe": "off"}, "dedupe saves exactly one tool run"),
    (
        "dedupe",
        {"stable_results": False},
        "the repeat costs exactly one more turn (once's 2nd prompt + g in, one call out)",
    ),
    (
        "permanent_error",
        {"drain_pending": True},
        "capped run keeps its last call pending: tool runs = turns − 1",
    ),
    ("dedupe_writes", {"gate": "all"}, "gate: 3 turns, 2 tool runs, deleted twice"),
    ("approval", {"auto_approve": True}, "stops at turn 2 for delete_file, nothing deleted"),
    # `reject()` always prefixes "Rejected by the user:", and the mock only looks for a keyword:
    # a rejection that drops the person's words still gets the truthful answer, but not this check.
    (
        "rejection_wording",
        {"reject": lambda reason: reject_with("declined")},
        "the reason is written, verbatim, where the model reads",
    ),
    ("rejection_wording", {"reject": lambda reason: reject_with("")}, "the worded rejection gets the truth"),
    ("kill_resume", {"intents": False}, "write-ahead resume asks instead of writing twice"),
    ("kill_resume", {"saved_cost": False}, "resumed run completes at the uninterrupted cost"),
    (
        "kill_resume",
        {"saved_cost": False},
        "restored after turn 2 with 6 messages, at the reference's first two turns' cost",
    ),
    (
        "cancellation",
        {"deaf_tools": True},
        "Stop reaches the tool: it stops mid-scan, the run interrupted with the reason",
    ),
    ("trace", {"trace": _LosesRunId()}, "the run id on every line"),
    (
        "latency",
        {"deliver_latency": False},
        "every run took at least N × latency (the latency is paid on every turn)",
    ),
    ("subagent", {"runaway_child_cap": 1000}, "a runaway child stops at its own cap of 6"),
    ("subagent", {"charge_child": False}, "a hard parent budget holds with the child's spending"),
    ("arithmetic", {"budget_check": "after_call"}, "our profile predicts our token and cost figures"),
    (
        "arithmetic",
        {"drain_pending": True},
        "a capped run keeps its last call pending (denied: tool runs = turns − 1)",
    ),
    (
        "caching",
        {"pricing": Pricing()},
        "the OpenAI-cached cost at every cap = the model's cached-term prediction",
    ),
    (
        "mcp_tool_errors",
        {"rpc_message": "Internal error"},
        "isError results and JSON-RPC errors: only the descriptive policy answers, as locally",
    ),
    (
        "mcp_permanent_error",
        {"rpc_message": "Internal error"},
        "isError and JSON-RPC errors cost what the local fed-back run costs",
    ),
]


def test_every_experiment_has_a_broken_run():
    assert {name for name, _, _ in BROKEN} == set(REGISTRY)


@pytest.mark.parametrize(("name", "knobs", "check"), BROKEN, ids=[f"{n}-{c[:30]}" for n, _, c in BROKEN])
def test_the_check_fails_when_the_mechanism_breaks(name, knobs, check, measure):
    module = REGISTRY[name]
    checks = module.checks(measure(module, **knobs))
    assert check in checks, f"{name} has no check {check!r}: {list(checks)}"
    assert checks[check] is False
