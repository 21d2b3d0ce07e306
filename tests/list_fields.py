"""One request per list-shaped field of every format, with `n` items in that field, and `/healthz`
timed while a mock in its own process serves them all."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from mock_support import p99_while

from experiments.lab.servers import mock_server

Body = tuple[str, dict[str, Any]]
USER = {"role": "user", "content": "x"}
MESSAGES = "/v1/messages"
GEMINI = "/v1beta/models/plan:generateContent"
VERTEX = "/v1/projects/p/locations/us-central1/publishers/google/models/plan:generateContent"


def _chat_results(n: int) -> Body:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "n", "arguments": "{}"}}
             for i in range(n)]
    results = [{"role": "tool", "tool_call_id": f"c{i}", "content": "r"} for i in range(n)]
    messages = [USER, {"role": "assistant", "tool_calls": calls}, *results]
    return "/v1/chat/completions", {"model": "plan", "messages": messages}


def _responses_results(n: int) -> Body:
    calls = [{"type": "function_call", "call_id": f"c{i}", "name": "n", "arguments": "{}"} for i in range(n)]
    outputs = [{"type": "function_call_output", "call_id": f"c{i}", "output": "r"} for i in range(n)]
    return "/v1/responses", {"model": "plan", "input": [USER, *calls, *outputs]}


def _messages(messages: list, **fields: Any) -> Body:
    return MESSAGES, {"model": "plan", "max_tokens": 100, "messages": messages, **fields}


def _messages_results(n: int) -> Body:
    uses = [{"type": "tool_use", "id": f"c{i}", "name": "n", "input": {}} for i in range(n)]
    results = [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "r"} for i in range(n)]
    return _messages([USER, {"role": "assistant", "content": uses}, {"role": "user", "content": results}])


def _messages_inner(n: int) -> Body:
    use = {"type": "tool_use", "id": "c", "name": "n", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "c", "content": [{"type": "text", "text": "x"}] * n}
    return _messages([USER, {"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}])


def _gemini(contents: list, **fields: Any) -> Body:
    return GEMINI, {"contents": contents, **fields}


def _ollama(messages: list, **fields: Any) -> Body:
    return "/api/chat", {"model": "plan", "stream": False, "messages": messages, **fields}


def _converse(messages: list, **fields: Any) -> Body:
    return "/model/plan/converse", {"messages": messages, **fields}


def _converse_results(n: int, reverse: bool = False) -> Body:
    uses = [{"toolUse": {"toolUseId": f"c{i}", "name": "n", "input": {}}} for i in range(n)]
    results = [{"toolResult": {"toolUseId": f"c{i}", "content": [{"text": "r"}]}} for i in range(n)]
    return _converse([CONVERSE_USER, {"role": "assistant", "content": uses},
                      {"role": "user", "content": results[::-1] if reverse else results}])


def _converse_inner(n: int) -> Body:
    use = {"toolUse": {"toolUseId": "c", "name": "n", "input": {}}}
    result = {"toolResult": {"toolUseId": "c", "content": [{"text": "x"}] * n}}
    return _converse([CONVERSE_USER, {"role": "assistant", "content": [use]},
                      {"role": "user", "content": [result]}])


TEXT_BLOCK = {"type": "text", "text": "x"}
MARKED = {**TEXT_BLOCK, "cache_control": {"type": "ephemeral"}}
GEMINI_USER = {"role": "user", "parts": [{"text": "x"}]}
OLLAMA_CALL = {"function": {"name": "n", "arguments": {}}}
CONVERSE_USER = {"role": "user", "content": [{"text": "x"}]}
CONVERSE_ASSISTANT = {"role": "assistant", "content": [{"text": "y"}]}

FIELDS: dict[str, Callable[[int], Body]] = {
    "chat messages": lambda n: ("/v1/chat/completions", {"model": "plan", "messages": [USER] * n}),
    "chat content parts": lambda n: ("/v1/chat/completions", {"model": "plan", "messages": [
        {"role": "user", "content": [TEXT_BLOCK] * n}]}),
    "chat tools": lambda n: ("/v1/chat/completions", {"model": "plan", "messages": [USER], "tools": [
        {"type": "function", "function": {"name": f"t{i}"}} for i in range(n)]}),
    "chat tool calls and results": _chat_results,
    "chat messages, streamed": lambda n: ("/v1/chat/completions", {"model": "plan", "stream": True,
                                                                   "messages": [USER] * n}),
    "responses input items": lambda n: ("/v1/responses", {"model": "plan", "input": [USER] * n}),
    "responses content parts": lambda n: ("/v1/responses", {"model": "plan", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "x"}] * n}]}),
    "responses tools": lambda n: ("/v1/responses", {"model": "plan", "input": "x", "tools": [
        {"type": "function", "name": f"t{i}"} for i in range(n)]}),
    "responses calls and outputs": _responses_results,
    "messages messages": lambda n: _messages([USER, {"role": "assistant", "content": "y"}] * n + [USER]),
    "messages content blocks": lambda n: _messages([{"role": "user", "content": [TEXT_BLOCK] * n}]),
    "messages content blocks, the last marked": lambda n: _messages([
        {"role": "user", "content": [TEXT_BLOCK] * n + [MARKED]}]),
    "messages system blocks": lambda n: _messages([USER], system=[TEXT_BLOCK] * n),
    "messages tools": lambda n: _messages([USER], tools=[
        {"name": f"t{i}", "input_schema": {"type": "object"}} for i in range(n)]),
    "messages tool uses and results": _messages_results,
    "messages tool result content": _messages_inner,
    "messages content blocks, counted": lambda n: ("/v1/messages/count_tokens", {
        "model": "plan", "messages": [{"role": "user", "content": [TEXT_BLOCK] * n}]}),
    "gemini contents": lambda n: _gemini([GEMINI_USER] * n),
    "gemini contents, counted": lambda n: ("/v1beta/models/plan:countTokens",
                                           {"contents": [GEMINI_USER] * n}),
    "vertex contents": lambda n: (VERTEX, {"contents": [GEMINI_USER] * n}),
    "gemini system parts": lambda n: _gemini([GEMINI_USER], systemInstruction={"parts": [{"text": "x"}] * n}),
    "gemini parts": lambda n: _gemini([{"role": "user", "parts": [{"text": "x"}] * n}]),
    "gemini function declarations": lambda n: _gemini([GEMINI_USER], tools=[
        {"functionDeclarations": [{"name": f"t{i}"} for i in range(n)]}]),
    "gemini calls and responses": lambda n: _gemini([
        GEMINI_USER, {"role": "model", "parts": [{"functionCall": {"name": "n", "args": {}}}] * n},
        {"role": "user", "parts": [{"functionResponse": {"name": "n", "response": {}}}] * n}]),
    "converse messages": lambda n: _converse([CONVERSE_USER, CONVERSE_ASSISTANT] * n + [CONVERSE_USER]),
    "converse content blocks": lambda n: _converse([{"role": "user", "content": [{"text": "x"}] * n}]),
    "converse content blocks, the last a cachePoint": lambda n: _converse([
        {"role": "user", "content": [{"text": "x"}] * n + [{"cachePoint": {"type": "default"}}]}]),
    "converse content blocks, cachePoints between them": lambda n: _converse([
        {"role": "user",
         "content": [{"text": "x"}] * n + [{"cachePoint": {"type": "default"}}, {"text": "y"}] * 4}]),
    "converse system blocks": lambda n: _converse([CONVERSE_USER], system=[{"text": "x"}] * n),
    "converse tools": lambda n: _converse([CONVERSE_USER], toolConfig={"tools": [
        {"toolSpec": {"name": f"t{i}", "inputSchema": {"json": {"type": "object"}}}} for i in range(n)]}),
    "converse tool uses and results": _converse_results,
    "converse tool results, the last call answered first": lambda n: _converse_results(n, reverse=True),
    "converse tool result content": _converse_inner,
    "converse content blocks, counted": lambda n: ("/model/plan/count-tokens", {"input": {"converse": {
        "messages": [{"role": "user", "content": [{"text": "x"}] * n}]}}}),
    "ollama messages": lambda n: _ollama([USER] * n),
    "ollama tools": lambda n: _ollama([USER], tools=[
        {"type": "function", "function": {"name": f"t{i}"}} for i in range(n)]),
    "ollama tool calls and results": lambda n: _ollama([
        USER, {"role": "assistant", "content": "", "tool_calls": [OLLAMA_CALL] * n},
        *[{"role": "tool", "content": "r"}] * n]),
}


def p99_while_every_field_is_served(items: int) -> tuple[float, int, list[tuple[str, int]]]:
    """`/healthz`'s p99 (s) and its probes while one request per field of FIELDS, each with `items`
    items, is sent to a mock in its own process (a probe is timed against the server, never
    against this process); and each field with the status its request got."""
    bodies = []
    for field, make in FIELDS.items():  # encoded first: the sender's own work is not the server's
        path, body = make(items)
        bodies.append((field, path, json.dumps(body).encode()))
        del body
    answered: list[tuple[str, int]] = []

    def send(client: httpx.Client) -> None:
        for field, path, data in bodies:
            response = client.post(path, content=data, headers={"content-type": "application/json"})
            answered.append((field, response.status_code))

    with mock_server("--max-body-bytes", str(32_000_000)) as (url, _):
        p99, probes = p99_while(url, send)
    return p99, probes, answered
