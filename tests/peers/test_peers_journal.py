"""The journal counts at the mock what a client sent and what the mock billed, and the lab's own
plumbing that needs no framework (no extra needed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from experiments.lab.runs import TASKS
from experiments.peers.case import TASKS as LAB_TASKS
from experiments.peers.case import Ending
from experiments.peers.journal import Journal
from experiments.peers.measure import Lab, Measured
from mockprovider.app import create_app
from mockprovider.server import serve_in_thread

ASK = [{"role": "user", "content": "Which file mentions a timeout?"}]
TOOLS = [{"type": "function", "function": {"name": "list_files"}}]
LISTED = "errors.log (270 bytes)"


@pytest.fixture(scope="module")
def journalled() -> Iterator[tuple[Journal, OpenAI]]:
    journal = Journal(create_app())
    with serve_in_thread(journal) as base_url, OpenAI(base_url=base_url, api_key="unused") as client:
        yield journal, client


def _answer_first_call(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="plan", messages=ASK, tools=TOOLS)
    call = reply.choices[0].message.tool_calls[0]
    messages = [*ASK, reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": LISTED}]
    client.chat.completions.create(model="plan", messages=messages, tools=TOOLS)


def test_a_window_holds_its_requests_with_the_usage_the_mock_billed(journalled) -> None:
    journal, client = journalled
    with journal.window() as seen:
        reply = client.chat.completions.create(model="plan", messages=ASK)
    assert len(seen) == 1
    assert seen[0].status == 200
    assert seen[0].prompt_tokens == reply.usage.prompt_tokens
    assert seen[0].completion_tokens == reply.usage.completion_tokens
    billed = reply.usage.prompt_tokens * 2e-6 + reply.usage.completion_tokens * 12e-6
    assert seen[0].cost_usd == pytest.approx(billed)


def test_the_text_sent_back_for_a_call_is_read_from_the_request(journalled) -> None:
    journal, client = journalled
    with journal.window() as seen:
        _answer_first_call(client)
    assert len(seen) == 2
    assert seen[0].tool_texts() == {}
    assert seen[1].tool_texts() == {"c1": LISTED}


def test_a_streamed_reply_is_billed_from_its_usage_chunk(journalled) -> None:
    journal, client = journalled
    with journal.window() as seen:
        chunks = list(client.chat.completions.create(
            model="plan", messages=ASK, stream=True, stream_options={"include_usage": True}))
    billed = next(c.usage for c in chunks if c.usage)
    assert seen[0].prompt_tokens == billed.prompt_tokens
    assert seen[0].completion_tokens == billed.completion_tokens


def test_a_refused_request_is_journalled_with_its_status_and_no_tokens(journalled) -> None:
    journal, client = journalled
    with journal.window() as seen, pytest.raises(Exception, match="plann"):
        client.with_options(max_retries=0).chat.completions.create(model="plann", messages=ASK)
    assert [(e.status, e.prompt_tokens) for e in seen] == [(404, 0)]


def test_a_request_in_flight_when_the_window_closes_is_counted_in_that_window(journalled) -> None:
    journal, client = journalled
    impatient = client.with_options(max_retries=0, timeout=0.1)
    with journal.window() as seen, pytest.raises(Exception, match="timed out"):
        impatient.chat.completions.create(model="plan+latency=600", messages=ASK)
    with journal.window() as after:
        pass
    assert len(seen) == 1  # the mock answers a client that went away with 499
    assert after == []


def test_a_whole_stream_without_usage_is_flagged_unbilled_not_counted_as_zero(journalled) -> None:
    journal, client = journalled
    with journal.window() as seen:
        list(client.chat.completions.create(model="plan", messages=ASK, stream=True))
    assert [e.unbilled for e in seen] == [True]
    unknown = Measured(ending=Ending(how="returned"), entries=seen, tool_runs=[], started=0.0, ended=1.0)
    with pytest.raises(ValueError, match="no usage"):
        _ = unknown.cost_usd


def test_the_lab_keeps_the_scenarios_tasks_as_the_experiments_have_them() -> None:
    assert {name: TASKS[name] for name in LAB_TASKS} == LAB_TASKS


def test_a_memory_child_imports_one_peer_and_no_pandas_or_matplotlib(journalled, tmp_path: Path) -> None:
    journal, client = journalled
    lab = Lab(journal=journal, base_url=str(client.base_url).rstrip("/"), workdir=tmp_path)
    got = lab.child("rss", "ours", lab.case())
    assert got["imported"] == ["harness"]
    assert got["text"].startswith("errors.log mentions a timeout")
    assert got["peak_rss_kib"] > 0
