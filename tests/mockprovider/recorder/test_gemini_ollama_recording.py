"""Gemini's and Ollama's sessions through the recording proxy: each reply shape they answer in
(whole, SSE, one JSON array, one object per line) is recorded, and what is not a reply is not."""

from __future__ import annotations

import json

import httpx
import pytest

from mockprovider.recorder import record
from mockprovider.recorder.gemini_ollama import gemini_reply, ollama_reply
from mockprovider.recorder.replies import NotRecordable
from mockprovider.server import serve_in_thread

TOOLS_GEMINI = [{"functionDeclarations": [{"name": "list_files"}]}]
TOOLS_CHAT = [{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}}]


def _gemini(text: str) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], "tools": TOOLS_GEMINI}


@pytest.mark.parametrize(("path", "query"), [
    ("/v1beta/models/plan:generateContent", ""),
    ("/v1/models/plan:generateContent", ""),
    ("/v1beta/models/plan:streamGenerateContent", "?alt=sse"),
    ("/v1beta/models/plan:streamGenerateContent", ""),  # one JSON array
])
def test_every_gemini_reply_shape_is_recorded_and_forwarded_under_the_upstreams_root(tmp_path, path, query):
    out = tmp_path / "gemini.json"
    with serve_in_thread(journal=10) as upstream, record(upstream, out) as proxy:
        sent = httpx.post(f"{proxy.root_url}{path}{query}", json=_gemini("Which file?"))
    assert sent.status_code == 200
    (turn,) = json.loads(out.read_text())["turns"]
    assert turn[0]["tool_calls"][0]["name"] == "list_files"


@pytest.mark.parametrize("stream", [False, True])
def test_an_ollama_chat_is_recorded_whole_or_line_by_line(tmp_path, stream):
    out = tmp_path / "ollama.json"
    body = {"model": "plan", "stream": stream, "tools": TOOLS_CHAT,
            "messages": [{"role": "user", "content": "Which file?"}]}
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        sent = httpx.post(f"{proxy.root_url}/api/chat", json=body)
    assert sent.status_code == 200
    media = sent.headers["content-type"]
    assert media.startswith("application/x-ndjson" if stream else "application/json")
    (turn,) = json.loads(out.read_text())["turns"]
    assert turn[0]["tool_calls"][0]["name"] == "list_files"


def test_other_gemini_and_ollama_routes_pass_through_unrecorded(tmp_path):
    out = tmp_path / "other.json"
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        tags = httpx.get(f"{proxy.root_url}/api/tags")
        counted = httpx.post(f"{proxy.root_url}/v1beta/models/plan:countTokens", json=_gemini("hi"))
    assert tags.status_code == 200 and "models" in tags.json()
    assert counted.status_code == 200 and counted.json()["totalTokens"] > 0
    assert not out.exists()


def test_a_strict_replay_answers_gemini_and_ollama_from_the_recording_and_refuses_the_rest(tmp_path):
    out = tmp_path / "both.json"
    ollama_body = {"model": "plan", "stream": False, "tools": TOOLS_CHAT,
                   "messages": [{"role": "user", "content": "Ollama asks"}]}
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        httpx.post(f"{proxy.root_url}/v1beta/models/plan:generateContent", json=_gemini("Gemini asks"))
        httpx.post(f"{proxy.root_url}/api/chat", json=ollama_body)
    with record("http://127.0.0.1:9/v1", out, strict=True) as replay:
        via_ollama = httpx.post(f"{replay.root_url}/api/chat", json={
            **ollama_body, "messages": [{"role": "user", "content": "Gemini asks"}]})
        missed = httpx.post(f"{replay.root_url}/v1beta/models/plan:generateContent",
                            json=_gemini("Never asked"))
    assert via_ollama.json()["message"]["tool_calls"][0]["function"]["name"] == "list_files"
    assert missed.status_code == 404 and missed.json()["error"]["status"] == "NOT_FOUND"
    assert replay.recorder.misses == ["POST /v1beta/models/plan:generateContent: turn 0 of 'Never asked'"]


def test_replies_that_are_errors_or_incomplete_are_not_recorded():
    with pytest.raises(NotRecordable, match="error"):
        gemini_reply(b'{"error": {"code": 500, "status": "INTERNAL"}}')
    with pytest.raises(NotRecordable, match="done"):
        ollama_reply(b'{"message": {"role": "assistant", "content": "half"}, "done": false}\n')
    whole = ollama_reply(b'{"message": {"content": "he"}, "done": false}\n{"message": {"content": "llo"},'
                         b' "done": true, "prompt_eval_count": 3, "eval_count": 2}')
    assert whole == {"content": "hello", "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
