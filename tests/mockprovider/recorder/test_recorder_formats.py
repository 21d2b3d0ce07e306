"""Recording through Chat Completions, Responses and Anthropic Messages into one scenario file,
each replayed through all three; the proxy-on-miss and strict modes; the `record` API."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mockprovider.app import create_app
from mockprovider.recorder import Stream, record
from mockprovider.recorder.replies import reply_of
from mockprovider.scripts.files import ScenarioFileError, compile_scenario
from mockprovider.server import serve_in_thread

Turn = tuple[str, list[tuple[str, str, Any]]]
"""(text, [(call id, tool name, parsed arguments)]) of one reply, whatever the format."""
RESULTS = {"list_files": "errors.log access.log", "read_file": "worker 7 timed out"}
FORMATS = ("chat", "responses", "messages")
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
              for n in RESULTS]
"""Offered every turn, in each format's shape: without tools a real model answers in text."""
RESPONSES_TOOLS = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in RESULTS]
MESSAGES_TOOLS = [{"name": n, "input_schema": {"type": "object"}} for n in RESULTS]


def _chat(url: str, model: str, task: str, stream: bool) -> list[Turn]:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
        return _chat_with(client, model, task, stream)


def _chat_with(client: Any, model: str, task: str, stream: bool) -> list[Turn]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    turns: list[Turn] = []
    while len(turns) < 6:
        if stream:
            text, parts = "", {}
            for chunk in client.chat.completions.create(model=model, messages=messages, tools=CHAT_TOOLS,
                                                        stream=True):
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for part in choice.delta.tool_calls or []:
                        slot = parts.setdefault(part.index, ["", "", ""])
                        for i, piece in enumerate((part.id, part.function.name, part.function.arguments)):
                            slot[i] += piece or ""
            calls = [tuple(slot) for _, slot in sorted(parts.items())]
        else:
            completion = client.chat.completions.create(model=model, messages=messages, tools=CHAT_TOOLS)
            message = completion.choices[0].message
            text = message.content or ""
            calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        turns.append((text, [(i, n, json.loads(a)) for i, n, a in calls]))
        if not calls:
            return turns
        messages.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]})
        messages += [{"role": "tool", "tool_call_id": i, "content": RESULTS[n]} for i, n, _ in calls]
    raise AssertionError("the session did not end")


def _responses(url: str, model: str, task: str, stream: bool) -> list[Turn]:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client:
        return _responses_with(client, model, task, stream)


def _responses_with(client: Any, model: str, task: str, stream: bool) -> list[Turn]:
    items: list[Any] = [{"role": "user", "content": task}]
    turns: list[Turn] = []
    while len(turns) < 6:
        if stream:
            with client.responses.stream(model=model, input=items, tools=RESPONSES_TOOLS) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(model=model, input=items, tools=RESPONSES_TOOLS)
        calls = [i for i in response.output if i.type == "function_call"]
        turns.append((response.output_text, [(c.call_id, c.name, json.loads(c.arguments)) for c in calls]))
        if not calls:
            return turns
        items += [{"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
                  for c in calls]
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": RESULTS[c.name]}
                  for c in calls]
    raise AssertionError("the session did not end")


def _messages(url: str, model: str, task: str, stream: bool) -> list[Turn]:
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
        return _messages_with(client, model, task, stream)


def _messages_with(client: Any, model: str, task: str, stream: bool) -> list[Turn]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    turns: list[Turn] = []
    while len(turns) < 6:
        kwargs = {"model": model, "max_tokens": 1024, "messages": messages, "tools": MESSAGES_TOOLS}
        if stream:
            with client.messages.stream(**kwargs) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        uses = [b for b in reply.content if b.type == "tool_use"]
        text = "".join(b.text for b in reply.content if b.type == "text")
        turns.append((text, [(b.id, b.name, b.input) for b in uses]))
        if not uses:
            return turns
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": RESULTS[b.name]} for b in uses]})
    raise AssertionError("the session did not end")


DRIVE = {"chat": _chat, "responses": _responses, "messages": _messages}


@pytest.fixture
def upstream() -> Iterator[tuple[str, Any]]:
    """A second mock, the 'real' server: (its root URL, its journal of requests)."""
    app = create_app(journal=100)
    with serve_in_thread(app) as url:
        yield url.removesuffix("/v1"), app.state.config.journal


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_session_recorded_in_one_format_replays_turn_by_turn_in_every_format(
    upstream, tmp_path: Path, fmt: str
):
    root, _ = upstream
    out = tmp_path / f"{fmt}.json"
    with record(f"{root}/v1", out) as proxy:
        recorded = DRIVE[fmt](proxy.root_url, "plan", "Which file?", stream=False)
        streamed = DRIVE[fmt](proxy.root_url, "plan", "Which file, streamed?", stream=True)
    assert [len(calls) for _, calls in recorded] == [1, 1, 0]
    assert recorded[-1][0].startswith("errors.log mentions a timeout")
    with serve_in_thread(scenario_files=[out]) as replay:
        replay_root = replay.removesuffix("/v1")
        for other in FORMATS:
            for stream in (False, True):
                assert DRIVE[other](replay_root, fmt, "Which file?", stream=stream) == recorded, other
                assert DRIVE[other](replay_root, fmt, "Which file, streamed?", stream=stream) == streamed


def test_one_recording_holds_turns_from_all_three_formats(upstream, tmp_path: Path):
    root, _ = upstream
    out = tmp_path / "mixed.json"
    with record(f"{root}/v1", out) as proxy:
        recorded = {fmt: DRIVE[fmt](proxy.root_url, "plan", f"Task via {fmt}", stream=fmt != "chat")
                    for fmt in FORMATS}
    users = {alt["if"]["user_contains"] for alt in json.loads(out.read_text())["turns"][0]}
    assert users == {f"Task via {fmt}" for fmt in FORMATS}
    with serve_in_thread(scenario_files=[out]) as replay:
        for fmt in FORMATS:
            replayed = _chat(replay.removesuffix("/v1"), "mixed", f"Task via {fmt}", stream=False)
            assert replayed == recorded[fmt]


def test_proxy_on_miss_replays_recorded_turns_and_forwards_and_records_the_rest(upstream, tmp_path: Path):
    root, journal = upstream
    out = tmp_path / "miss.json"
    with record(f"{root}/v1", out) as proxy:
        first = _chat(proxy.root_url, "plan", "Known task", stream=False)
    forwarded = len(journal.entries())
    with record(f"{root}/v1", out, proxy_on_miss=True) as proxy:
        for fmt in FORMATS:
            assert DRIVE[fmt](proxy.root_url, "plan", "Known task", stream=True) == first
        assert len(journal.entries()) == forwarded  # every turn came from the recording
        second = _responses(proxy.root_url, "plan", "New task", stream=False)
    assert len(journal.entries()) == forwarded + 3
    assert sum(line.startswith("replayed turn") for line in proxy.log) == 9
    with serve_in_thread(scenario_files=[out]) as replay:
        assert _chat(replay.removesuffix("/v1"), "miss", "New task", stream=False) == second
        assert _chat(replay.removesuffix("/v1"), "miss", "Known task", stream=False) == first


def test_strict_answers_recorded_turns_and_refuses_the_rest_in_each_format(upstream, tmp_path: Path):
    root, _ = upstream
    out = tmp_path / "strict.json"
    with record(f"{root}/v1", out) as proxy:
        recorded = _messages(proxy.root_url, "plan", "Known task", stream=False)
    before = out.read_bytes()
    with record("http://127.0.0.1:9/v1", out, strict=True) as proxy:  # nothing listens upstream
        for fmt in FORMATS:
            assert DRIVE[fmt](proxy.root_url, "claude-x", "Known task", stream=True) == recorded
        with pytest.raises(openai.NotFoundError) as chat_miss:
            _chat(proxy.root_url, "claude-x", "Unknown task", stream=False)
        with pytest.raises(openai.NotFoundError) as responses_miss:
            _responses(proxy.root_url, "claude-x", "Unknown task", stream=False)
        with pytest.raises(anthropic.NotFoundError) as messages_miss:
            _messages(proxy.root_url, "claude-x", "Unknown task", stream=False)
        models = httpx.get(f"{proxy.base_url}/models")
    for miss in (chat_miss, responses_miss):
        assert miss.value.body["code"] == "not_recorded"
    assert messages_miss.value.body["type"] == "error"
    assert "Nothing is recorded" in messages_miss.value.body["error"]["message"]
    assert (models.status_code, models.json()["error"]["code"]) == (404, "not_recorded")
    assert out.read_bytes() == before  # strict never writes


def test_strict_needs_an_existing_recording(tmp_path: Path):
    with pytest.raises(ValueError, match="does not exist: --strict replays an existing recording"):
        with record("http://127.0.0.1:9/v1", tmp_path / "none.json", strict=True):
            pass


def _both_upstream() -> Starlette:
    """An upstream whose every reply holds text and a tool call, in the format asked for."""
    call = {"id": "w1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    text = "Let me check."
    chat_call = {"id": call["id"], "type": "function",
                 "function": {"name": call["name"], "arguments": call["arguments"]}}

    async def chat(request: Request) -> Response:
        if (await request.json()).get("stream"):
            chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                      {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **chat_call}]}}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return Response(body, media_type="text/event-stream")
        message = {"role": "assistant", "content": text, "tool_calls": [chat_call]}
        return JSONResponse({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                             "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})

    async def responses(request: Request) -> Response:
        return JSONResponse({"output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
            {"type": "function_call", "call_id": call["id"], "name": call["name"],
             "arguments": call["arguments"]}]})

    async def messages(request: Request) -> Response:
        return JSONResponse({"type": "message", "role": "assistant", "content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {"city": "Paris"}}]})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/responses", responses, methods=["POST"]),
                             Route("/v1/messages", messages, methods=["POST"])])


def _format_holds_both() -> bool:
    try:
        both = {"content": "a", "tool_calls": [{"name": "f"}]}
        compile_scenario({"name": "probe", "turns": [both]}, source="probe")
    except ScenarioFileError:
        return False
    return True


WEATHER = [{"role": "user", "content": "weather"}]


@pytest.mark.parametrize(("path", "body"), [
    ("chat/completions", {"model": "m", "messages": WEATHER}),
    ("chat/completions", {"model": "m", "messages": WEATHER, "stream": True}),
    ("responses", {"model": "m", "input": "weather"}),
    ("messages", {"model": "m", "max_tokens": 9, "messages": WEATHER}),
])
def test_a_reply_with_text_and_tool_calls_keeps_both(tmp_path: Path, path: str, body: dict):
    out = tmp_path / "both.json"
    with serve_in_thread(_both_upstream()) as upstream, record(upstream, out) as proxy:
        assert httpx.post(f"{proxy.base_url}/{path}", json=body).status_code == 200
    (reply,) = json.loads(out.read_text())["turns"][0]
    call = reply["tool_calls"][0]
    assert (call["name"], call["id"], json.loads(call["arguments"]) if isinstance(call["arguments"], str)
            else call["arguments"]) == ("get_weather", "w1", {"city": "Paris"})
    if _format_holds_both():
        assert reply["content"] == "Let me check."
        assert proxy.log[-1].startswith("recorded turn 0 (text, get_weather)")
    else:  # a scenario format of prose or calls: the calls are kept and the log says what was lost
        assert "content" not in reply
        assert proxy.log[-1].endswith("(its text beside the tool calls was dropped: the format holds one or "
                                      "the other)")


def test_a_test_records_with_a_with_block_and_the_file_is_ready_inside_it(upstream, tmp_path: Path):
    root, _ = upstream
    with record(f"{root}/v1", tmp_path / "api.json") as proxy:
        with openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
            client.chat.completions.create(model="plan", messages=[{"role": "user", "content": "go"}],
                                           tools=CHAT_TOOLS)
        assert json.loads(proxy.out.read_text())["turns"][0][0]["tool_calls"][0]["name"] == "list_files"
    assert proxy.base_url == f"{proxy.root_url}/v1"
    assert proxy.log == [f"recorded turn 0 (list_files) of 'go' in {tmp_path / 'api.json'}"]


def test_the_docs_example_runs_as_written(tmp_path: Path):
    text = (Path(__file__).resolve().parents[3] / "docs" / "recorder.md").read_text()
    (snippet,) = re.findall(r"## In a test.*?```python\n(.*?)```", text, re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(compile(snippet, "docs/recorder.md", "exec"), namespace)
    namespace["test_my_agent_records_and_replays"](tmp_path)
    assert json.loads((tmp_path / "agent.json").read_text())["name"] == "agent"


def _format_holds_usage() -> bool:
    try:
        compile_scenario({"name": "probe", "turns": [
            {"content": "a", "usage": {"prompt_tokens": 1, "completion_tokens": 1}}]}, source="probe")
    except ScenarioFileError:
        return False
    return True


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_the_upstreams_usage_is_recorded_beside_the_reply(
    upstream, tmp_path: Path, fmt: str, stream: bool
):
    root, _ = upstream
    out = tmp_path / "usage.json"
    with record(f"{root}/v1", out) as proxy:
        if fmt == "chat" and stream:  # the chat stream carries usage only when asked
            with openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
                chunks = list(client.chat.completions.create(
                    model="plan", messages=[{"role": "user", "content": "go"}], stream=True, tools=CHAT_TOOLS,
                    stream_options={"include_usage": True}))
            sent = (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens)
        else:
            DRIVE[fmt](proxy.root_url, "plan", "go", stream=stream)
            sent = None
    (reply,) = json.loads(out.read_text())["turns"][0]
    if not _format_holds_usage():
        assert "usage" not in reply
        return
    usage = reply["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    if sent is not None:
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == sent


def _events(*events: tuple[str, dict]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def test_each_formats_reply_is_read_with_its_usage_whole_or_streamed():
    expected = {"content": "hi", "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
    whole = {
        "chat": {"choices": [{"message": {"role": "assistant", "content": "hi"}}],
                 "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}},
        "responses": {"output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}],
                      "usage": {"input_tokens": 7, "output_tokens": 2}},
        "messages": {"content": [{"type": "text", "text": "hi"}],
                     "usage": {"input_tokens": 7, "output_tokens": 2}},
    }
    for fmt, body in whole.items():
        assert reply_of(fmt, json.dumps(body).encode()) == expected, fmt
    streams = {
        "chat": b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in (
            {"choices": [{"delta": {"content": "h"}}]},
            {"choices": [{"delta": {"content": "i"}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}})) + b"data: [DONE]\n\n",
        "responses": _events(("response.output_text.delta", {"delta": "hi"}),
                             ("response.completed", {"response": whole["responses"]})),
        "messages": _events(
            ("message_start", {"message": {"usage": {"input_tokens": 7, "output_tokens": 1}}}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
            ("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
            ("message_stop", {})),
    }
    for fmt, raw in streams.items():
        reader = Stream(fmt)
        for i in range(0, len(raw), 5):
            reader.feed(raw[i:i + 5])
        assert (reader.finished, reader.reply()) == (True, expected), fmt


def test_a_messages_reply_records_its_whole_prompt_cache_reads_and_writes_included():
    """Anthropic's `input_tokens` is only the part after the last cache breakpoint; the prompt a
    replay serves under `usage=recorded` is that part plus what was read from and written to the
    cache (OpenAI's `cached_tokens` is already inside its input count, so nothing is added there)."""
    usage = {"input_tokens": 3, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 40,
             "output_tokens": 2}
    expected = {"content": "hi", "usage": {"prompt_tokens": 2091, "completion_tokens": 2}}
    whole = {"content": [{"type": "text", "text": "hi"}], "usage": usage}
    assert reply_of("messages", json.dumps(whole).encode()) == expected
    reader = Stream("messages")
    reader.feed(_events(
        ("message_start", {"message": {"usage": {**usage, "output_tokens": 1}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
        ("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": usage}),
        ("message_stop", {})))
    assert reader.reply() == expected
    responses = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}],
                 "usage": {"input_tokens": 2091, "input_tokens_details": {"cached_tokens": 2048},
                           "output_tokens": 2}}
    assert reply_of("responses", json.dumps(responses).encode()) == expected
    proxied = {"choices": [{"message": {"role": "assistant", "content": "hi"}}],
               "usage": {"prompt_tokens": 2091, "completion_tokens": 2, "cache_read_input_tokens": 2048}}
    assert reply_of("chat", json.dumps(proxied).encode()) == expected


def test_a_dead_upstream_is_a_502_in_each_formats_own_shape(tmp_path: Path):
    with record("http://127.0.0.1:9/v1", tmp_path / "dead.json") as proxy:
        with pytest.raises(openai.InternalServerError) as chat:
            _chat(proxy.root_url, "m", "go", stream=False)
        with pytest.raises(anthropic.InternalServerError) as messages:
            _messages(proxy.root_url, "m", "go", stream=False)
    assert chat.value.status_code == messages.value.status_code == 502
    assert chat.value.body["code"] == "upstream_unreachable"
    assert messages.value.body["type"] == "error"
    assert messages.value.body["error"]["type"] == "api_error"


def test_a_messages_turn_under_the_interleaved_thinking_beta_is_recorded(upstream, tmp_path: Path):
    # Under that beta a thinking budget may exceed max_tokens (the whole turn's): the upstream
    # takes it, so the recorder must read the request with the same header, not refuse it.
    root, _ = upstream
    out = tmp_path / "beta.json"
    body = {"model": "plan", "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 5000},
            "messages": [{"role": "user", "content": "Which file, thinking?"}]}
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"}
    with record(f"{root}/v1", out) as proxy:
        answered = httpx.post(f"{proxy.root_url}/v1/messages", json=body, headers=headers)
        assert answered.status_code == 200, answered.text
    users = {alt["if"]["user_contains"] for alt in json.loads(out.read_text())["turns"][0]}
    assert users == {"Which file, thinking?"}
