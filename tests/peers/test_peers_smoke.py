"""The frameworks at two exits, counted at the mock: skipped unless the `peers` extra is installed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langgraph.prebuilt")
pytest.importorskip("langchain_openai")

from experiments.peers.journal import Journal  # noqa: E402
from experiments.peers.measure import (  # noqa: E402
    Lab,
    approval,
    cancellation,
    memory,
    peers,
    tool_errors,
    turn_cap,
)
from mockprovider.app import create_app  # noqa: E402
from mockprovider.server import serve_in_thread  # noqa: E402


@pytest.fixture(scope="module")
def journalled() -> Iterator[tuple[Journal, str]]:
    journal = Journal(create_app())
    with serve_in_thread(journal) as base_url:
        yield journal, base_url


@pytest.fixture
def lab(journalled: tuple[Journal, str], tmp_path: Path) -> Lab:
    journal, base_url = journalled
    return Lab(journal=journal, base_url=base_url, workdir=tmp_path, fast=True)


def _by_name(rows: list[dict]) -> dict[str, dict]:
    return {r["framework"]: r for r in rows}


def test_at_a_cap_of_8_every_peer_makes_8_requests_and_the_last_call_runs_drops_or_waits(lab: Lab) -> None:
    every = [r for p in peers() for r in asyncio.run(turn_cap(lab, p))]
    rows = {(r["framework"], r["setting"]): r for r in every}
    documented = [rows[k] for k in rows if k[1] in ("max_turns=8", "request_limit=8", "recursion_limit=16")]
    assert len(documented) == 4
    assert {r["requests"] for r in documented} == {8}
    assert rows["OpenAI Agents SDK", "max_turns=8"]["call of the last reply"] == "ran"
    assert rows["pydantic-ai", "request_limit=8"]["call of the last reply"] == "ran"
    assert rows["LangGraph", "recursion_limit=16"]["call of the last reply"] == "dropped"
    assert rows["LangGraph", "recursion_limit=16"]["tool runs"] == 7
    ours = rows["ours (harness)", "max_turns=8"]
    assert ours["tool runs"] == 7
    assert ours["call of the last reply"] == "pending, resumable"
    assert ours["caller gets"].startswith("max_turns_exceeded")
    assert rows["LangGraph", "recursion_limit=15"]["caller gets"].startswith("raised")
    assert rows["LangGraph", "recursion_limit=17"]["requests"] == 9


def test_stop_pressed_by_the_lab_reaches_every_peers_tool_and_ends_the_run(lab: Lab) -> None:
    rows = _by_name([r for p in peers() for r in asyncio.run(cancellation(lab, p))])
    for name, row in rows.items():
        assert row["Stop pressed at ms"] is not None, name
        assert row["tool saw it"], name
        assert not row["tool finished anyway"], name
        # The scan takes 3 s; a run that ended before it would have is one Stop ended.
        assert row["run ended at ms"] < 2900, name


def test_by_default_only_our_harness_sends_the_error_sentence_back(lab: Lab) -> None:
    rows = [r for p in peers() for r in asyncio.run(tool_errors(lab, p))]
    default = _by_name([r for r in rows if r["setting"] == "default"])
    documented = _by_name([r for r in rows if r["setting"] != "default"])
    generic = "An error occurred while running the tool. Please try again."
    assert default["OpenAI Agents SDK"]["text sent back"] == generic
    assert not default["OpenAI Agents SDK"]["recovers"]
    for name in ("pydantic-ai", "LangGraph"):
        assert default[name]["caller gets"] == "raised FileNotFoundError"
        assert default[name]["requests"] == 1
    assert default["ours (harness)"]["recovers"]
    assert all(documented[n]["recovers"] for n in ("OpenAI Agents SDK", "pydantic-ai", "LangGraph"))


def test_langgraph_approval_survives_a_new_process_deletes_once_and_a_second_resume_does_nothing(
        lab: Lab) -> None:
    langgraph = next(p for p in peers() if p.NAME == "LangGraph")
    [row] = asyncio.run(approval(lab, langgraph))
    assert row["deleted before approval"] == 0
    assert row["delete_file runs"] == 1
    assert not row["access.log still there after approval"]
    assert row["answer"] == "Deleted access.log to free space."
    assert row["delete_file runs after that"] == 1


def test_a_frameworks_memory_row_carries_neither_the_harness_nor_pandas(lab: Lab) -> None:
    agents_sdk = next(p for p in peers() if p.NAME == "OpenAI Agents SDK")
    [row] = memory(lab, [agents_sdk])  # raises if the child imported either
    assert row["answer"].startswith("errors.log mentions a timeout")
    assert row["its own MiB"] > 0
