"""An Azure OpenAI session through the recording proxy: `AzureOpenAI` records through its
deployment routes (plain and streamed, with Azure's content-filter chunk), and the recording
replays offline through Azure's routes and through the other formats."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from mockprovider.recorder import record
from mockprovider.scripts.scenarios import ANSWER_PLAN
from mockprovider.server import serve_in_thread

VERSION = "2024-10-21"
QUESTION = "Which file mentions a timeout?"
RESULTS = {"list_files": "errors.log\nnotes.txt", "read_file": "worker 7 timed out after 30000 ms"}
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in RESULTS]


def _plan(client: openai.OpenAI, model: str, *, stream: bool) -> str:
    """plan's three turns through `client`; the answer."""
    messages: list = [{"role": "user", "content": QUESTION}]
    for _ in range(3):
        if stream:
            with client.chat.completions.stream(model=model, messages=messages, tools=TOOLS) as events:
                message = events.get_final_completion().choices[0].message
        else:
            reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
            message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        messages += [{"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.function.name]}
                     for c in message.tool_calls]
    raise AssertionError("plan did not answer in three turns")


@pytest.mark.parametrize("stream", [False, True])
def test_an_azure_session_is_recorded_and_replays_through_azure_and_chat(tmp_path, stream):
    out = tmp_path / "azure.json"
    with serve_in_thread(journal=20) as upstream, record(upstream, out) as proxy:
        azure = openai.AzureOpenAI(azure_endpoint=proxy.root_url, api_key="k", api_version=VERSION)
        with azure:
            assert _plan(azure, "plan+content_filter=on", stream=stream) == ANSWER_PLAN
        sent = httpx.get(upstream.removesuffix("/v1") + "/journal").json()["data"]
    assert [e["path"] for e in sent] == ["/openai/deployments/plan+content_filter=on/chat/completions"] * 3
    turns = json.loads(out.read_text())["turns"]
    assert len(turns) == 3 and turns[2][0]["content"] == ANSWER_PLAN
    with record("http://127.0.0.1:9/v1", out, strict=True) as replay:
        azure = openai.AzureOpenAI(azure_endpoint=replay.root_url, api_key="k", api_version=VERSION)
        chat = openai.OpenAI(base_url=f"{replay.root_url}/v1", api_key="k")
        with azure, chat:
            assert _plan(azure, "any-deployment", stream=not stream) == ANSWER_PLAN
            assert _plan(chat, "any-model", stream=stream) == ANSWER_PLAN
    assert replay.recorder.misses == []


def test_an_azure_responses_turn_is_recorded_and_replays_through_gemini(tmp_path):
    out = tmp_path / "responses.json"
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        azure = openai.AzureOpenAI(azure_endpoint=proxy.root_url, api_key="k", api_version=VERSION)
        with azure:
            reply = azure.responses.create(model="plan", input=QUESTION, tools=[
                {"type": "function", "name": name, "parameters": {"type": "object"}} for name in RESULTS])
    assert reply.output[0].name == "list_files"
    with record("http://127.0.0.1:9/v1", out, strict=True) as replay:
        body = {"contents": [{"role": "user", "parts": [{"text": QUESTION}]}],
                "tools": [{"functionDeclarations": [{"name": name} for name in RESULTS]}]}
        gemini = httpx.post(f"{replay.root_url}/v1beta/models/plan:generateContent", json=body)
    assert gemini.json()["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "list_files"


def test_azures_other_routes_pass_through_unrecorded(tmp_path):
    out = tmp_path / "other.json"
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        azure = openai.AzureOpenAI(azure_endpoint=proxy.root_url, api_key="k", api_version=VERSION)
        with azure:
            vectors = azure.embeddings.create(model="text-embedding-3-small", input="worker 7")
        unversioned = f"{proxy.root_url}/openai/deployments/plan/chat/completions"
        missing = httpx.post(unversioned, json={"messages": []})
    assert len(vectors.data[0].embedding) == 1536
    assert missing.status_code == 404
    assert missing.json() == {"error": {"code": "404", "message": "Resource not found"}}
    assert not out.exists()
