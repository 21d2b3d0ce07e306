"""The kit's journal records at the mock what a client sent and what the mock answered and billed;
the kit's core imports no agent, no framework and no plotting."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI

from exitkit.journal import Journal
from mockprovider.app import create_app
from mockprovider.server import serve_in_thread

ASK = [{"role": "user", "content": "Which file mentions a timeout?"}]
TOOLS = [{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}}]
"""Offered so the mock, like a real model, may answer with a tool call."""


@pytest.fixture(scope="module")
def journalled() -> Iterator[tuple[Journal, str]]:
    journal = Journal(create_app())
    with serve_in_thread(journal) as base_url:
        yield journal, base_url


def test_a_window_holds_its_requests_with_the_usage_the_mock_billed(journalled) -> None:
    journal, base_url = journalled
    with OpenAI(base_url=base_url, api_key="unused") as client, journal.window() as seen:
        reply = client.chat.completions.create(model="plan", messages=ASK, tools=TOOLS)
    [entry] = seen
    assert (entry.status, entry.reply_calls, entry.reply_text) == (200, ("list_files",), "")
    assert (entry.prompt_tokens, entry.completion_tokens) == (reply.usage.prompt_tokens,
                                                              reply.usage.completion_tokens)
    billed = reply.usage.prompt_tokens * 2e-6 + reply.usage.completion_tokens * 12e-6
    assert entry.cost_usd == pytest.approx(billed)


def test_a_stream_is_read_for_its_text_and_without_include_usage_it_is_unbilled(journalled) -> None:
    journal, base_url = journalled
    call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    messages = [*ASK, {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "errors.log"},
                {"role": "assistant", "tool_calls": [{**call, "id": "c2", "function": {
                    "name": "read_file", "arguments": '{"path": "errors.log"}'}}]},
                {"role": "tool", "tool_call_id": "c2", "content": "worker 7 timed out"}]
    with OpenAI(base_url=base_url, api_key="unused") as client, journal.window() as seen:
        for usage in (False, True):
            options = {"stream_options": {"include_usage": True}} if usage else {}
            for _ in client.chat.completions.create(model="plan", messages=messages, stream=True, **options):
                pass
    assert [e.unbilled for e in seen] == [True, False]
    answer = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
    assert seen[0].reply_text == seen[1].reply_text == answer
    assert seen[0].tool_texts() == {"c1": "errors.log", "c2": "worker 7 timed out"}
    assert seen[0].unanswered_calls() == []


def test_an_assistant_call_without_its_result_is_found_as_dangling(journalled) -> None:
    journal, base_url = journalled
    call = {"id": "c1", "type": "function", "function": {"name": "scan_archive", "arguments": "{}"}}
    with journal.window() as seen:
        httpx.post(f"{base_url}/chat/completions", json={
            "model": "slow", "messages": [*ASK, {"role": "assistant", "tool_calls": [call]},
                                          {"role": "user", "content": "go on"}]})
    assert seen[0].unanswered_calls() == ["c1"]


def test_the_guard_refuses_requests_past_it_with_an_openai_shaped_400(journalled) -> None:
    journal, base_url = journalled
    with journal.window(guard=1) as seen:
        first = httpx.post(f"{base_url}/chat/completions", json={"model": "plan", "messages": ASK})
        second = httpx.post(f"{base_url}/chat/completions", json={"model": "plan", "messages": ASK})
    assert (first.status_code, second.status_code) == (200, 400)
    assert second.json()["error"]["code"] == "exitkit_guard"
    assert [e.guarded for e in seen] == [False, True]
    after = httpx.post(f"{base_url}/chat/completions", json={"model": "plan", "messages": ASK})
    assert after.status_code == 200  # the guard ends with its window


def test_the_kits_core_imports_no_agent_framework_or_plotting() -> None:
    core = "exitkit, exitkit.card, exitkit.cases, exitkit.child, exitkit.report, exitkit.overhead"
    probe = (f"import sys, json; import {core}; from exitkit.runner import Kit\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('harness', 'openai', 'agents', 'pydantic_ai', 'langgraph', 'langchain_core', 'pandas', "
             "'matplotlib', 'experiments'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          timeout=60)
    assert json.loads(done.stdout) == []


def test_requests_to_other_model_apis_are_recorded_and_guarded_not_missed(journalled) -> None:
    journal, base_url = journalled
    with httpx.Client(base_url=base_url) as http, journal.window(guard=2) as seen:
        anthropic = {"model": "runaway", "max_tokens": 50, "messages": [{"role": "user", "content": "go"}]}
        statuses = [http.post("/responses", json={"model": "runaway", "input": "go"}).status_code,
                    http.post("/messages", json=anthropic).status_code,
                    http.post("/responses", json={"model": "runaway", "input": "go"}).status_code]
    assert statuses == [200, 200, 400]
    assert [(e.path, e.guarded) for e in seen] == [("/v1/responses", False), ("/v1/messages", False),
                                                   ("/v1/responses", True)]


def test_a_body_cut_off_by_a_dying_client_is_no_request_the_agent_made(journalled) -> None:
    # A process that exits mid-upload leaves half a body: the model was asked nothing, so no
    # verdict may read it as a request for another model.
    import socket
    from urllib.parse import urlsplit

    journal, base_url = journalled
    where = urlsplit(base_url)
    body = json.dumps({"model": "plan", "messages": ASK}).encode()
    with journal.window() as seen:
        with socket.create_connection((where.hostname, where.port)) as sock:
            sock.sendall(f"POST {where.path}/chat/completions HTTP/1.1\r\nhost: x\r\n"
                         f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                         + body[:len(body) // 2])
        with httpx.Client(base_url=base_url) as http:
            assert http.post("/chat/completions", json={"model": "plan", "messages": ASK}).status_code == 200
    assert [(e.request.get("model"), e.status) for e in seen] == [("plan", 200)]
