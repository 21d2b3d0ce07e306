"""One transcript reader serves every wire format.

Each format translates its request into the chat shape and reads it with `transcript.read`, the
chat route's reader. So the same conversation, sent in any format, is the same turn, tool text
and prompt tokens as on the chat route; and whatever a format's own checks let through, the
reader accepts, so a refusal always comes in the format's own words, never the chat route's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import o200k
from mockprovider.apis.anthropic import messages_request
from mockprovider.apis.gemini_request import generate_request
from mockprovider.apis.ollama import chat_request
from mockprovider.apis.responses import responses_request
from mockprovider.apis.shared import ChatShaped
from mockprovider.app import create_app
from mockprovider.errors import APIError
from mockprovider.reading import transcript
from mockprovider.scripts import scenarios
from mockprovider.server import serve_in_thread

Message = dict[str, Any]
SCHEMAS = {
    "list_files": ("List the files.", {"type": "object", "properties": {}}),
    "read_file": ("Read one file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
}
CHAT_TOOLS = [{"type": "function", "function": {"name": name, "description": d, "parameters": s}}
              for name, (d, s) in SCHEMAS.items()]
CHAT_WORDING = ("messages.[", "preceeding", "did not have response messages", "Invalid 'messages'")
"""What only the chat reader's own refusals say."""

texts = st.text(max_size=8)
arguments = st.dictionaries(st.sampled_from(["path", "n"]), texts | st.integers(), max_size=2)


# --- the same conversation in every format ---------------------------------------------------


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    encoded = json.dumps(args, separators=(",", ":"), ensure_ascii=False)  # as every format encodes them
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": encoded}}


@st.composite
def conversations(draw) -> list[Message]:
    """An agent loop's chat messages: a system prompt maybe, a task, then exchanges in which an
    assistant says something, calls tools, or both, each call answered (in any order)."""
    messages: list[Message] = [{"role": "system", "content": draw(texts)}] if draw(st.booleans()) else []
    messages.append({"role": "user", "content": draw(texts)})
    made = 0
    for _ in range(draw(st.integers(0, 4))):
        calls = [_call(f"t{made + k}", draw(st.sampled_from(list(SCHEMAS))), draw(arguments))
                 for k in range(draw(st.integers(0, 2)))]
        made += len(calls)
        content = draw(texts) if not calls or draw(st.booleans()) else None
        messages.append({"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})})
        for call in draw(st.permutations(calls)):
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": draw(texts)})
        if not calls or draw(st.booleans()):  # after plain text the user speaks again
            messages.append({"role": "user", "content": draw(texts)})
    return messages


def _parts(m: Message) -> tuple[str | None, list[tuple[str, str, dict[str, Any]]]]:
    """An assistant message's text and its calls as (id, name, arguments object)."""
    calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in m.get("tool_calls", [])]
    return m.get("content"), calls


def responses_body(messages: list[Message]) -> dict[str, Any]:
    tools = [{"type": "function", "name": name, "description": d, "parameters": s}
             for name, (d, s) in SCHEMAS.items()]
    body: dict[str, Any] = {"model": "echo", "input": [], "tools": tools}
    for m in messages:
        if m["role"] == "system":
            body["instructions"] = m["content"]
        elif m["role"] == "tool":
            body["input"].append({"type": "function_call_output", "call_id": m["tool_call_id"],
                                  "output": m["content"]})
        elif m["role"] == "assistant":
            text, calls = _parts(m)
            if text is not None:
                body["input"].append({"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": text}]})
            body["input"] += [{"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(
                a, separators=(",", ":"), ensure_ascii=False)} for i, n, a in calls]
        else:
            body["input"].append({"type": "message", "role": m["role"], "content": m["content"]})
    return body


def messages_body(messages: list[Message]) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "echo", "max_tokens": 100_000, "messages": [], "tools": [
        {"name": name, "description": d, "input_schema": s} for name, (d, s) in SCHEMAS.items()]}
    out = body["messages"]
    for m in messages:
        if m["role"] == "system":
            body["system"] = m["content"]
        elif m["role"] == "tool":  # every result of one assistant message goes in the next message
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if out[-1]["role"] == "user" and out[-1]["content"][0]["type"] == "tool_result":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant":
            text, calls = _parts(m)
            blocks = [] if text is None else [{"type": "text", "text": text}]
            blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": [{"type": "text", "text": m["content"]}]})
    return body


def gemini_body(messages: list[Message]) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [], "tools": [{"functionDeclarations": [
        {"name": name, "description": d, "parameters": s} for name, (d, s) in SCHEMAS.items()]}]}
    names: dict[str, str] = {}
    for m in messages:
        if m["role"] == "system":
            body["systemInstruction"] = {"parts": [{"text": m["content"]}]}
        elif m["role"] == "tool":
            call_id = m["tool_call_id"]
            reply = {"id": call_id, "name": names.get(call_id, "list_files"),
                     "response": {"result": m["content"]}}
            body["contents"].append({"role": "user", "parts": [{"functionResponse": reply}]})
        elif m["role"] == "assistant":
            text, calls = _parts(m)
            parts: list[dict[str, Any]] = [] if text is None else [{"text": text}]
            parts += [{"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls]
            names.update((i, n) for i, n, _ in calls)
            body["contents"].append({"role": "model", "parts": parts})
        else:
            body["contents"].append({"role": "user", "parts": [{"text": m["content"]}]})
    return body


def ollama_body(messages: list[Message]) -> dict[str, Any]:
    out = []
    for m in messages:
        if m["role"] == "assistant":
            text, calls = _parts(m)
            o: dict[str, Any] = {"role": "assistant", "content": text or ""}
            if calls:
                o["tool_calls"] = [{"id": i, "function": {"name": n, "arguments": a}} for i, n, a in calls]
            out.append(o)
        else:
            out.append(dict(m))
    return {"model": "echo", "messages": out, "stream": False, "tools": CHAT_TOOLS}


# Each format: its path, its body, and (turn, tool text, prompt tokens) read from its reply.
Seen = tuple[int, str, int]


def _echoed(text: str, prompt_tokens: int) -> Seen:
    said = json.loads(text)
    return said["turn"], said["tool_text"], prompt_tokens


Format = tuple[str, Callable[[list[Message]], dict[str, Any]], Callable[[dict[str, Any]], Seen]]
FORMATS: dict[str, Format] = {
    "responses": ("/v1/responses", responses_body,
                  lambda r: _echoed(r["output"][0]["content"][0]["text"], r["usage"]["input_tokens"])),
    "messages": ("/v1/messages", messages_body,
                 lambda r: _echoed(r["content"][0]["text"], r["usage"]["input_tokens"])),
    "gemini": ("/v1beta/models/echo:generateContent", gemini_body,
               lambda r: _echoed(r["candidates"][0]["content"]["parts"][0]["text"],
                                 r["usageMetadata"]["promptTokenCount"])),
    "ollama": ("/api/chat", ollama_body, lambda r: _echoed(r["message"]["content"], r["prompt_eval_count"])),
}


def echo(c: scenarios.Conversation) -> scenarios.Reply:
    """Says what it sees of the conversation: its turn and its tool text."""
    return scenarios.text(json.dumps({"turn": c.turn, "tool_text": c.tool_text}))


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    """A real server whose scenarios include `echo`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(scenarios.SCENARIOS, "echo", echo)
        app = create_app()
    with serve_in_thread(app) as url, httpx.Client(base_url=url.removesuffix("/v1")) as http:
        yield http


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversations())
def test_a_conversation_is_the_same_turn_tool_text_and_prompt_tokens_in_every_format(client, messages):
    chat = _post(client, "/v1/chat/completions", {"model": "echo", "messages": messages, "tools": CHAT_TOOLS})
    expected = _echoed(chat["choices"][0]["message"]["content"], chat["usage"]["prompt_tokens"])
    for name, (path, body, seen) in FORMATS.items():
        assert seen(_post(client, path, body(messages))) == expected, name


# --- what a format accepts, the reader accepts ----------------------------------------------


TRANSLATORS: dict[str, Callable[[list[Message]], ChatShaped]] = {
    "responses": lambda ms: responses_request(responses_body(ms)).chat,
    "messages": lambda ms: messages_request(messages_body(ms)),
    "gemini": lambda ms: generate_request(gemini_body(ms), model="echo", stream=False),
    "ollama": lambda ms: chat_request(ollama_body(ms)),
}


@st.composite
def broken(draw) -> list[Message]:
    """A conversation with its answers disturbed: one dropped, repeated, moved past the next
    message, or aimed at a call no message made; maybe several."""
    messages = draw(conversations())
    for _ in range(draw(st.integers(1, 3))):
        answers = [k for k, m in enumerate(messages) if m["role"] == "tool"]
        if not answers:
            break
        k = draw(st.sampled_from(answers))
        change = draw(st.sampled_from(["drop", "repeat", "move", "retarget"]))
        if change == "drop":
            del messages[k]
        elif change == "repeat":
            messages.insert(k, dict(messages[k]))
        elif change == "move":
            messages.insert(min(k + 2, len(messages)), messages.pop(k))
        else:
            messages[k] = {**messages[k], "tool_call_id": "nobody"}
    return messages


@pytest.mark.parametrize("fmt", TRANSLATORS)
@settings(max_examples=150, deadline=None)
@given(broken())
def test_what_a_format_lets_through_the_reader_accepts(fmt, messages):
    try:
        shaped = TRANSLATORS[fmt](messages)
    except APIError as e:  # refused by the format's own checks, in its own words
        assert not any(words in e.message for words in CHAT_WORDING), e.message
        event("refused by the format")
        return
    event("let through")
    t = transcript.read(shaped.messages, paired=shaped.paired)
    assert t.counted == len(shaped.messages)  # short texts: all counted as they are read
    assert t.tokens == o200k.prompt_tokens(shaped.messages)
    assert t.turn == sum(m["role"] == "assistant" for m in shaped.messages)


UNANSWERED = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None,
                                                   "tool_calls": [_call("t0", "list_files", {})]}]
ORPHAN = [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "t9", "content": "x"}]


@pytest.mark.parametrize("fmt", ["responses", "messages"])
@pytest.mark.parametrize("messages", [UNANSWERED, ORPHAN], ids=["unanswered", "orphan"])
def test_a_format_with_strict_answers_refuses_in_its_own_words(client, fmt, messages):
    path, body, _ = FORMATS[fmt]
    response = client.post(path, json=body(messages))
    assert response.status_code == 400
    error = response.json()["error"]
    assert not any(words in error["message"] for words in CHAT_WORDING), error
    if fmt == "messages":
        assert response.json()["type"] == "error" and error["type"] == "invalid_request_error"
    else:
        assert error["param"] == "input"


@pytest.mark.parametrize("fmt", ["gemini", "ollama"])
def test_a_format_that_pairs_by_name_answers_an_unanswered_call_and_refuses_an_orphan(client, fmt):
    path, body, seen = FORMATS[fmt]
    assert seen(_post(client, path, body(UNANSWERED)))[0] == 1  # as Gemini and Ollama answer it
    response = client.post(path, json=body(ORPHAN[:1] + [{**ORPHAN[1], "tool_call_id": None}]))
    assert response.status_code == 400
    error = response.json()["error"]
    message = error["message"] if fmt == "gemini" else error
    refused = "Please ensure that function response turn" if fmt == "gemini" else "answers no earlier"
    assert refused in message and not any(words in message for words in CHAT_WORDING)
    if fmt == "gemini":
        assert error["status"] == "INVALID_ARGUMENT"
