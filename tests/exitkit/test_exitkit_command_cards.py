"""A command agent's whole card: the correct one passes every case it declares, and each broken
one fails exactly the case of its bug (the agents are plain Python scripts standing in for any
language: the environment, the job file, httpx for the model, the `mcp` client for the tools)."""

from __future__ import annotations

import pytest
from test_exitkit_command import command

from exitkit.card import check
from exitkit.verdict import CASES

EXITS = [c for c in CASES if c != "overhead"]
BROKEN = {"ignores-cap": ("turn_cap", "cap ignored"),
          "reruns-effect": ("approval", "ran again on a second resume"),
          "dangles": ("cancellation", "next request invalid")}


@pytest.mark.slow
def test_a_command_agent_written_from_the_contract_passes_every_case_it_declares() -> None:
    adapters, results = check([], commands=[command("file_agent.py")], fast=True, log=lambda line: None)
    assert adapters[0].limits == {"max_turns", "max_budget_usd", "approval", "cancel", "resume"}
    assert {r.case: r.verdict for r in results} == dict.fromkeys(CASES, "pass"), [r.cell for r in results]
    by = {r.case: r for r in results}
    assert by["cancellation"].figures["tool saw it"] is True  # notifications/cancelled reached the kit's tool
    assert by["crash"].figures["crashed process exit"] == -9
    assert by["overhead"].figures["peak RSS MiB"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", BROKEN)
def test_a_broken_command_agent_fails_exactly_the_case_of_its_bug(mode: str) -> None:
    case, says = BROKEN[mode]
    _, results = check([], commands=[command("file_agent.py", mode)], cases=EXITS, log=lambda line: None)
    verdicts = {r.case: r.verdict for r in results}
    assert verdicts == {c: "fail" if c == case else "pass" for c in EXITS}, [r.cell for r in results]
    assert says in next(r.summary for r in results if r.case == case)


@pytest.mark.slow
def test_the_minimal_command_agent_gets_the_card_the_docs_say() -> None:
    _, results = check([], commands=[command("minimal.py")], cases=EXITS, log=lambda line: None)
    assert {r.case: r.verdict for r in results} == {
        "turn_cap": "pass", "tool_error": "pass", "cancellation": "pass", "budget": "none exists",
        "approval": "none exists", "crash": "none exists", "permanent_error": "fail",
    }, [r.cell for r in results]
