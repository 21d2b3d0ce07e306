"""The frameworks' findings, each measured by the kit in that framework's own virtualenv.

`make peers` builds `.venv-peers/<name>` per framework (their pins clash, so none of them is in
the lab's virtualenv); a framework whose virtualenv is not there is skipped, and the skip says so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from experiments.peers import FRAMEWORKS

ROOT = Path(__file__).resolve().parents[2]
A = "exitkit.adapters."
JUDGE = """
import json, sys
from exitkit.card import check
_, results = check([sys.argv[1]], cases=sys.argv[2:], log=lambda line: None)
print(json.dumps([r.to_json() | {"evidence": {}} for r in results]))
"""
pytestmark = pytest.mark.slow


def _python(framework: str) -> Path:
    python = ROOT / ".venv-peers" / framework / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{framework} is not installed: `make peers` builds .venv-peers/{framework}")
    return python


def _in(framework: str, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(_python(framework)), "-c", script, *args], capture_output=True, text=True,
                          timeout=900, check=False, cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})


def _judge(framework: str, spec: str, *cases: str) -> dict[str, dict[str, Any]]:
    done = _in(framework, JUDGE, spec, *cases)
    assert done.returncode == 0, done.stderr[-3000:]
    return {r["case"]: r for r in json.loads(done.stdout.splitlines()[-1])}


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f.extra is not None], ids=lambda f: f.name)
def test_every_framework_adapter_loads_in_its_own_virtualenv_and_declares_what_it_has(framework) -> None:
    script = ("import sys; from exitkit.loader import declared, load\n"
              "for spec in sys.argv[1:]: print(sorted(declared(spec, load(spec)).limits))")
    done = _in(framework.name, script, *framework.adapters)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.splitlines()) == len(framework.adapters)


def test_agnos_tool_call_limit_does_not_stop_the_loop() -> None:
    cap = _judge("agno", f"{A}agno:Agno", "turn_cap")["turn_cap"]
    assert (cap["verdict"], cap["figures"]["requests"]) == ("fail", 60), cap["summary"]


@pytest.mark.parametrize(("framework", "spec"), [("agno", "agno:Agno"), ("strands", "strands:Strands"),
                                                 ("llamaindex", "llamaindex:LlamaIndex"), ("adk", "adk:ADK")])
def test_the_side_effect_runs_twice_after_a_crash(framework: str, spec: str) -> None:
    crash = _judge(framework, A + spec, "crash")["crash"]
    assert (crash["verdict"], crash["figures"]["delete_file runs"]) == ("fail", 2), crash["summary"]


def test_adks_rejection_never_carries_the_persons_reason() -> None:
    approval = _judge("adk", f"{A}adk:ADK", "approval")["approval"]
    assert approval["figures"]["the rejection's reason reaches the model"] is False
    assert approval["figures"]["text sent back on rejection"] == '{"error": "This tool call is rejected."}'


def test_llamaindex_loses_the_agents_memory_in_the_context_it_saves() -> None:
    approval = _judge("llamaindex", f"{A}llamaindex:LlamaIndex", "approval")["approval"]
    assert "Path 'memory' not found in state" in approval["figures"]["resumed"], approval["figures"]


def test_autogen_never_returns_when_stop_arrives_during_a_tool_call() -> None:
    cancel = _judge("autogen", f"{A}autogen:AutoGen", "cancellation")["cancellation"]
    assert cancel["summary"].startswith("never returned after Stop · kit timeout"), cancel["summary"]


def test_smolagents_sends_a_tool_error_back_as_user_text_and_the_kit_finds_it() -> None:
    error = _judge("smolagents", f"{A}smolagents:Smolagents", "tool_error")["tool_error"]
    assert (error["verdict"], error["figures"]["sent as"]) == ("pass", "user"), error["summary"]
    assert "Call list_files to see what exists." in error["figures"]["text sent back"]


def test_langgraph_over_mcp_differs_from_wrapped_only_where_a_tool_error_becomes_a_result() -> None:
    cases = ("tool_error", "permanent_error", "approval", "crash", "cancellation")
    wrapped = _judge("langgraph", f"{A}langgraph:LangGraph", *cases)
    over_mcp = _judge("langgraph", f"{A}langgraph_mcp:LangGraphOverMCP", *cases)
    # Wrapped, a raised tool error escapes the graph; over MCP it is an `isError` result whose text
    # the model reads: it recovers, and it asks again for the file it may not read.
    assert (wrapped["tool_error"]["verdict"], over_mcp["tool_error"]["verdict"]) == ("fail", "pass")
    assert (wrapped["permanent_error"]["verdict"], over_mcp["permanent_error"]["verdict"]) == ("pass", "fail")
    assert over_mcp["permanent_error"]["figures"]["identical failing calls"] > 1
    for case in ("approval", "crash", "cancellation"):
        assert over_mcp[case]["verdict"] == wrapped[case]["verdict"], (case, over_mcp[case]["summary"])
    runs = [r["crash"]["figures"]["delete_file runs"] for r in (wrapped, over_mcp)]
    assert runs == [2, 2]
    # Stop cancels the graph's task; the mcp SDK's client, cancelled with it, sends the notification.
    assert over_mcp["cancellation"]["figures"]["cancel reached the tool"] == "notifications/cancelled"
    assert wrapped["cancellation"]["figures"]["cancel reached the tool"] is None
