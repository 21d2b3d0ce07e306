"""The TypeScript/JavaScript agents (`node-agents/`) under the kit, as command adapters.

Each runs every exit (overhead aside: a figure, not a verdict) through `exitkit.card.check` with
`commands=`, exactly as `make peers` runs it. node_modules comes from the lock with `npm ci`, the
way the Makefile's stamp installs it (`experiments/peers/node.py`); only a machine without `node`
skips, and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from exitkit.card import check
from exitkit.command import describe
from exitkit.mcp import CLOSED, NOTIFIED
from exitkit.verdict import CASES, Result
from experiments.peers import COMMANDS, node

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "node-agents"
LOOP, VERCEL, AGENTS_JS = (f"node {FOLDER}/{a}.mjs" for a in ("openai-loop", "vercel-ai", "openai-agents"))
EXITS = [case for case in CASES if case != "overhead"]


@pytest.fixture(scope="module")
def installed() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: the TypeScript/JavaScript agents need it (.ci/run installs nodejs)")
    got = node.ensure(FOLDER, log=lambda line: None)
    assert got.python is not None, got.error


@pytest.fixture(scope="module")
def cards(installed: None) -> dict[str, dict[str, Result]]:
    """Each agent's results, by case: one card per agent, run once for the module."""
    _, results = check([], commands=[LOOP, VERCEL, AGENTS_JS], cases=EXITS, log=lambda line: None)
    by_agent: dict[str, dict[str, Result]] = {}
    for result in results:
        by_agent.setdefault(result.adapter, {})[result.case] = result
    return by_agent


def _card(cards: dict[str, dict[str, Result]], name: str) -> dict[str, Result]:
    return next(results for agent, results in cards.items() if agent.startswith(name))


def test_make_peers_runs_both_agents_from_the_repository_root() -> None:
    assert list(COMMANDS) == ["node node-agents/openai-loop.mjs", "node node-agents/vercel-ai.mjs",
                              "node node-agents/openai-agents.mjs"]


def test_each_agent_describes_itself_with_every_limit_its_framework_has(installed: None) -> None:
    everything = {"max_turns", "max_budget_usd", "approval", "cancel", "resume"}
    loop, vercel = describe(LOOP, os.environ), describe(VERCEL, os.environ)
    assert (loop.name, loop.limits) == ("plain Node openai loop", everything)
    assert vercel.name == f"Vercel AI SDK {node.version(FOLDER, 'ai')}"
    assert vercel.limits == everything
    agents_js = describe(AGENTS_JS, os.environ)
    assert agents_js.name == f"OpenAI Agents SDK (JS) {node.version(FOLDER, '@openai/agents')}"
    assert agents_js.limits == everything - {"max_budget_usd"}  # the SDK has no spending limit


@pytest.mark.slow
def test_the_plain_node_loop_passes_every_exit(cards: dict[str, dict[str, Result]]) -> None:
    loop = _card(cards, "plain Node openai loop")
    assert {case: r.verdict for case, r in loop.items()} == dict.fromkeys(EXITS, "pass"), {
        case: r.summary for case, r in loop.items()}
    assert loop["turn_cap"].figures["requests"] == 8
    assert loop["budget"].figures["requests after the budget was reached"] == 0
    # Recorded as started before the call, the deletion is in doubt after the crash, not run again.
    assert loop["crash"].figures["delete_file runs"] == 1
    assert loop["crash"].figures["surfaced as in doubt"]
    # The official MCP client sends notifications/cancelled when Stop aborts the call: the tool sees it.
    assert loop["cancellation"].figures["tool saw it"]
    assert loop["cancellation"].figures["cancel reached the tool"] == NOTIFIED
    assert loop["cancellation"].figures["dangling tool calls"] == []


@pytest.mark.slow
def test_the_vercel_ai_sdk_holds_its_limits_and_approvals(cards: dict[str, dict[str, Result]]) -> None:
    vercel = _card(cards, "Vercel AI SDK")
    for case in ("turn_cap", "budget", "tool_error", "approval", "cancellation"):
        assert vercel[case].verdict == "pass", (case, vercel[case].summary)
    # stepCountIs(8): the eighth step runs its tool before the condition is checked.
    assert (vercel["turn_cap"].figures["requests"], vercel["turn_cap"].figures["last call"]) == (8, "ran")
    # The rejection's reason is the tool result the model reads (the SDK's `execution-denied` output).
    assert "audit" in vercel["approval"].figures["text sent back on rejection"]
    # Its MCP client sends no notifications/cancelled: the tool ends with the session its close ends.
    assert vercel["cancellation"].figures["tool saw it"]
    assert vercel["cancellation"].figures["cancel reached the tool"] == CLOSED


@pytest.mark.slow
def test_the_vercel_ai_sdk_retries_a_permission_error_and_reruns_an_approved_call_after_a_crash(
        cards: dict[str, dict[str, Result]]) -> None:
    vercel = _card(cards, "Vercel AI SDK")
    # A tool error is data to the model and nothing in the SDK stops a call that failed the same way:
    # the model asks again until the step cap.
    assert vercel["permanent_error"].verdict == "fail"
    assert vercel["permanent_error"].figures["identical failing calls"] == 12
    # The saved messages hold the approval and no trace of the call having started, so the approved
    # call runs again in the next process (its second run finds the file gone).
    assert vercel["crash"].verdict == "fail"
    crash = vercel["crash"].figures
    assert (crash["delete_file runs"], crash["deletions done"]) == (2, 1)


@pytest.mark.slow
def test_the_openai_agents_sdk_for_js_holds_its_cap_approvals_and_stop_and_reruns_after_a_crash(
        cards: dict[str, dict[str, Result]]) -> None:
    agents = _card(cards, "OpenAI Agents SDK (JS)")
    for case in ("turn_cap", "tool_error", "approval", "cancellation"):
        assert agents[case].verdict == "pass", (case, agents[case].summary)
    assert agents["cancellation"].figures["cancel reached the tool"] == NOTIFIED
    # No budget of its own: the outside cap of 60 turns ends the run.
    assert agents["budget"].verdict == "none exists"
    assert agents["budget"].figures["requests"] == 60
    # An MCP error result is the tool's output to the model, which asks again until maxTurns.
    assert agents["permanent_error"].verdict == "fail"
    assert agents["permanent_error"].figures["identical failing calls"] == 12
    # The RunState saved at the approval is all a new process has: the approved call runs again.
    assert agents["crash"].verdict == "fail"
    assert agents["crash"].figures["delete_file runs"] == 2


@pytest.mark.parametrize("saved", ['{"messages": [', "[]", "{}"])
@pytest.mark.parametrize(("agent", "state"), [("openai-loop", "openai-loop.json"),
                                              ("vercel-ai", "vercel-ai.json"),
                                              ("openai-agents", "openai-agents.json")])
def test_a_resume_on_a_state_file_the_agent_did_not_write_ends_saying_which_file(
        installed: None, tmp_path: Path, agent: str, state: str, saved: str) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / state).write_text(saved)
    job = {"action": "resume", "decision": {"approve": True}, "base_url": "http://127.0.0.1:9/v1",
           "api_key": "k", "model": "destructive", "task": "t", "system": "s",
           "mcp_url": "http://127.0.0.1:9/mcp",
           "limits": {"max_turns": 8, "max_budget_usd": None, "needs_approval": ["delete_file"]},
           "state_dir": str(tmp_path / "state")}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = os.environ | {"EXITKIT_ACTION": "resume", "EXITKIT_JOB": str(tmp_path / "job.json"),
                        "EXITKIT_DECISION": '{"approve": true}'}
    done = subprocess.run(["node", str(FOLDER / f"{agent}.mjs")], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert (done.returncode, outcome["status"]) == (1, "error")
    assert outcome["error"].startswith(f"the saved state {tmp_path / 'state' / state} "), outcome["error"]
