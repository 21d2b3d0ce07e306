"""The frameworks through the kit, at the exits where they differ: skipped without the `peers` extra."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("langchain_openai")

from exitkit.card import run_case  # noqa: E402
from exitkit.loader import declared, load  # noqa: E402
from exitkit.runner import Kit  # noqa: E402
from exitkit.verdict import Result  # noqa: E402
from experiments.peers import ADAPTERS  # noqa: E402

SDK, PYDANTIC, LANGGRAPH = (f"exitkit.adapters.{m}" for m in ("agents_sdk", "pydantic_ai", "langgraph"))
DEFAULTS = (f"{SDK}:AgentsSDK", f"{PYDANTIC}:PydanticAI", f"{LANGGRAPH}:LangGraph")
FIXED = (f"{SDK}:AgentsSDKExplained", f"{PYDANTIC}:PydanticAIModelRetry", f"{LANGGRAPH}:LangGraphHandled")


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    with Kit.serve(Path(tmp_path_factory.mktemp("peers"))) as served:
        yield served


def _judge(kit: Kit, spec: str, case: str) -> Result:
    return run_case(kit, declared(spec, load(spec)), case, fast=True)


def test_every_peer_adapter_loads_and_declares_only_limits_it_has() -> None:
    for spec in ADAPTERS:
        assert declared(spec, load(spec)).limits
    assert "max_budget_usd" not in load(f"{SDK}:AgentsSDK").limits
    assert "max_budget_usd" not in load(f"{LANGGRAPH}:LangGraph").limits


def test_at_a_cap_of_8_the_last_call_runs_in_two_frameworks_and_langgraph_drops_it(kit: Kit) -> None:
    fates = {spec: _judge(kit, spec, "turn_cap") for spec in DEFAULTS}
    assert {r.figures["requests"] for r in fates.values()} == {8}
    assert [r.figures["last call"] for r in fates.values()] == ["ran", "ran", "dropped"]
    assert fates[f"{LANGGRAPH}:LangGraph"].verdict == "warn"


def test_by_default_no_framework_recovers_from_a_tool_error_and_each_documented_fix_does(kit: Kit) -> None:
    default = {spec: _judge(kit, spec, "tool_error") for spec in DEFAULTS}
    assert all(r.verdict == "fail" for r in default.values())
    generic = "An error occurred while running the tool. Please try again."
    assert default[f"{SDK}:AgentsSDK"].figures["text sent back"] == generic
    assert default[f"{PYDANTIC}:PydanticAI"].figures["text sent back"] == "(nothing)"
    for spec in FIXED:
        assert _judge(kit, spec, "tool_error").verdict == "pass", spec


@pytest.mark.slow
def test_pydantic_ais_cost_limit_never_fires_for_a_model_it_has_no_price_for(kit: Kit) -> None:
    result = _judge(kit, f"{PYDANTIC}:PydanticAI", "budget")
    assert result.verdict == "fail"
    assert result.figures["requests"] == 60
