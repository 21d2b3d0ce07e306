"""The official `openai` client, sync and async, streaming and not, drives `plan` over a real socket."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import openai
import pytest

import o200k as tokens

QUESTION = {"role": "user", "content": "Which file mentions a timeout?"}
TOOL_RESULTS = {
    "list_files": "errors.log\naccess.log\nnotes.txt\nprivate.key",
    "read_file": "12:00 worker 7 timed out after 30000 ms",
}
PLAN_ANSWER = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in TOOL_RESULTS]
PLAN = {"model": "plan", "tools": TOOLS}
"""Every request offers the tools: without them a real model (and the mock) answers in text."""


@dataclass(frozen=True)
class Turn:
    finish_reason: str
    content: str | None
    calls: tuple[tuple[str, str, str], ...]
    """(id, name, arguments JSON string) per tool call, in order."""
    usage: tuple[int, int, int]
    """(prompt, completion, total) tokens."""


def _feed_back(messages: list[dict], turn: Turn) -> None:
    """Append the assistant's reply and, for each tool call, the tool's result."""
    assistant: dict = {"role": "assistant", "content": turn.content}
    if turn.calls:
        assistant["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in turn.calls
        ]
    messages.append(assistant)
    messages.extend({"role": "tool", "tool_call_id": i, "content": TOOL_RESULTS[n]} for i, n, _ in turn.calls)


def _expected_plan() -> list[Turn]:
    """The chapter's script, with usage computed independently from `o200k`."""
    script = [
        ("tool_calls", None, (("c1", "list_files", "{}"),)),
        ("tool_calls", None, (("c2", "read_file", '{"path":"errors.log"}'),)),
        ("stop", PLAN_ANSWER, ()),
    ]
    messages: list[dict] = [QUESTION]
    turns = []
    for finish, content, calls in script:
        prompt = tokens.prompt_tokens(messages, TOOLS)
        wire = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
        completion = tokens.count(tokens.tool_calls_json(wire)) if calls else tokens.count(content)
        turn = Turn(finish, content, calls, (prompt, completion, prompt + completion))
        turns.append(turn)
        _feed_back(messages, turn)
    return turns


def _from_completion(completion) -> Turn:
    choice = completion.choices[0]
    calls = tuple((c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or ())
    u = completion.usage
    return Turn(
        choice.finish_reason,
        choice.message.content,
        calls,
        (u.prompt_tokens, u.completion_tokens, u.total_tokens),
    )


def _from_chunks(chunks: list) -> Turn:
    """Reassemble a streamed reply: content deltas concatenated, tool calls merged by index."""
    content: str | None = None
    calls: dict[int, list[str]] = {}
    finish = None
    usage = None
    for chunk in chunks:
        if chunk.usage is not None:
            assert not chunk.choices, "the usage chunk carries no choices"
            usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens, chunk.usage.total_tokens)
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                content = (content or "") + delta.content
            for tc in delta.tool_calls or ():
                slot = calls.setdefault(tc.index, ["", "", ""])
                if tc.id:
                    slot[0] = tc.id
                if tc.function and tc.function.name:
                    slot[1] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot[2] += tc.function.arguments
            finish = choice.finish_reason or finish
    assert usage is not None, "stream_options.include_usage must add a usage chunk"
    return Turn(finish, content, tuple(tuple(calls[i]) for i in sorted(calls)), usage)


STREAM_KW = {"stream": True, "stream_options": {"include_usage": True}}


def _drive_sync(client: openai.OpenAI, *, stream: bool) -> list[Turn]:
    messages: list[dict] = [QUESTION]
    turns = []
    for _ in range(3):
        if stream:
            with client.chat.completions.create(messages=messages, **PLAN, **STREAM_KW) as chunks:
                turn = _from_chunks(list(chunks))
        else:
            turn = _from_completion(client.chat.completions.create(messages=messages, **PLAN))
        turns.append(turn)
        _feed_back(messages, turn)
    return turns


async def _drive_async(client: openai.AsyncOpenAI, *, stream: bool) -> list[Turn]:
    messages: list[dict] = [QUESTION]
    turns = []
    for _ in range(3):
        if stream:
            chunks = await client.chat.completions.create(messages=messages, **PLAN, **STREAM_KW)
            async with chunks:
                turn = _from_chunks([c async for c in chunks])
        else:
            turn = _from_completion(await client.chat.completions.create(messages=messages, **PLAN))
        turns.append(turn)
        _feed_back(messages, turn)
    return turns


def _run(mock_url: str, *, use_async: bool, stream: bool) -> list[Turn]:
    if use_async:

        async def main() -> list[Turn]:
            async with openai.AsyncOpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
                return await _drive_async(client, stream=stream)

        return asyncio.run(main())
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        return _drive_sync(client, stream=stream)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_official_client_drives_plan_through_three_turns(mock_url, use_async, stream):
    turns = _run(mock_url, use_async=use_async, stream=stream)
    expected = _expected_plan()
    assert [(t.finish_reason, t.content, t.calls) for t in turns] == [
        (t.finish_reason, t.content, t.calls) for t in expected
    ]
    assert [t.usage for t in turns] == [t.usage for t in expected]


def test_plan_script_is_the_chapters(mock_url):
    turns = _run(mock_url, use_async=False, stream=False)
    assert [c[:2] for t in turns for c in t.calls] == [("c1", "list_files"), ("c2", "read_file")]
    assert [json.loads(c[2]) for t in turns for c in t.calls] == [{}, {"path": "errors.log"}]
    assert turns[-1].content == PLAN_ANSWER
    assert [t.finish_reason for t in turns] == ["tool_calls", "tool_calls", "stop"]


def test_streamed_usage_equals_non_streamed_usage(mock_url):
    streamed = _run(mock_url, use_async=False, stream=True)
    plain = _run(mock_url, use_async=False, stream=False)
    assert [t.usage for t in streamed] == [t.usage for t in plain]
    assert streamed == plain


def test_stream_without_include_usage_sends_no_usage(mock_url):
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        with client.chat.completions.create(messages=[QUESTION], **PLAN, stream=True) as chunks:
            received = list(chunks)
    assert received and all(c.usage is None and c.choices for c in received)
    assert received[-1].choices[0].finish_reason == "tool_calls"


def test_completion_object_is_openai_shaped(mock_url):
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        completion = client.chat.completions.create(model="plan", messages=[QUESTION], tools=TOOLS)
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "plan"
    assert isinstance(completion.created, int)
    assert len(completion.choices) == 1
    (call,) = completion.choices[0].message.tool_calls
    assert call.type == "function"
    assert completion.choices[0].message.role == "assistant"
