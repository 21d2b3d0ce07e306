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
from experiments.peers.measure import Lab, approval, peers, tool_errors, turn_cap  # noqa: E402
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


def test_at_a_cap_of_8_every_peer_makes_8_requests_and_langgraph_drops_the_last_call(lab: Lab) -> None:
    rows = _by_name([r for p in peers() for r in asyncio.run(turn_cap(lab, p))])
    assert {r["requests"] for r in rows.values()} == {8}
    assert rows["LangGraph"]["tool runs"] == 7
    assert rows["LangGraph"]["caller gets"] == "returned"
    assert rows["OpenAI Agents SDK"]["caller gets"] == "raised MaxTurnsExceeded"
    assert rows["ours (harness)"]["caller gets"].startswith("max_turns_exceeded")


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


def test_langgraph_approval_survives_a_new_process_and_deletes_once(lab: Lab) -> None:
    langgraph = next(p for p in peers() if p.NAME == "LangGraph")
    [row] = asyncio.run(approval(lab, langgraph))
    assert row["deleted before approval"] == 0
    assert row["delete_file runs in total"] == 1
    assert row["answer"] == "Deleted access.log to free space."
