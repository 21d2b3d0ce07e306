"""Reasoning: billed as output, reported where each API reports it, shown as the SDKs expect
(a Responses reasoning item, a Messages thinking block with its signature)."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest
from mock_support import serve_scripts
from spec_support import errors

import o200k
from mockprovider.scripts.scenarios import Conversation, Reply, ToolCall

THOUGHT = "The user asks about a timeout, so the logs should say which worker timed out."
ANSWER = "errors.log mentions a timeout."
HIDDEN = 120
QUESTION = [{"role": "user", "content": "Which file mentions a timeout?"}]
NAMES = ("list_files", "read_file")
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in NAMES]
RESPONSES_TOOLS = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in NAMES]
MESSAGES_TOOLS = [{"name": n, "input_schema": {"type": "object"}} for n in NAMES]
"""Offered in every request: a real model calls only tools it is offered, and so does the mock."""


def ponder(c: Conversation) -> Reply:
    """Thinks aloud before a call, then thinks silently (a count only) before the answer."""
    if c.turn == 0:
        return Reply(tool_calls=(ToolCall(id="c1", name="list_files", arguments="{}"),), reasoning=THOUGHT)
    return Reply(content=ANSWER, reasoning=HIDDEN)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_scripts(ponder=ponder) as base:
        yield base


def _thought_tokens() -> int:
    return o200k.count(THOUGHT)


def _call_tokens() -> int:
    return o200k.tool_calls_tokens([{"id": "c1", "type": "function",
                                     "function": {"name": "list_files", "arguments": "{}"}}])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_bills_reasoning_as_output_and_reports_it(url, stream):
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        if stream:
            chunks = list(client.chat.completions.create(
                model="ponder", messages=QUESTION, tools=CHAT_TOOLS, stream=True,
                stream_options={"include_usage": True}))
            usage = chunks[-1].usage
        else:
            usage = client.chat.completions.create(model="ponder", messages=QUESTION, tools=CHAT_TOOLS).usage
    assert usage.completion_tokens_details.reasoning_tokens == _thought_tokens()
    assert usage.completion_tokens == _thought_tokens() + _call_tokens()


def test_max_tokens_counts_reasoning_first(url):
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        reply = client.chat.completions.create(model="ponder", messages=QUESTION, tools=CHAT_TOOLS,
                                               max_tokens=5)
    assert reply.choices[0].finish_reason == "length" and reply.choices[0].message.tool_calls is None
    assert reply.usage.completion_tokens == reply.usage.completion_tokens_details.reasoning_tokens == 5


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_emit_a_reasoning_item_before_the_reply(url, stream):
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        if stream:
            events = list(client.responses.create(model="ponder", input=QUESTION, tools=RESPONSES_TOOLS,
                                                  stream=True))
            response = events[-1].response
            summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
            assert summary == THOUGHT
            assert [d for e in events for d in errors(e.model_dump(mode="json", exclude_unset=True),
                                                      "ResponseStreamEvent")] == []
        else:
            response = client.responses.create(model="ponder", input=QUESTION, tools=RESPONSES_TOOLS)
        # The reasoning item goes back in the next request's input, as the API asks.
        answer = client.responses.create(model="ponder", tools=RESPONSES_TOOLS, input=[
            *QUESTION, *[o.model_dump(exclude_none=True) for o in response.output],
            {"type": "function_call_output", "call_id": "c1", "output": "errors.log"}])
    assert [o.type for o in response.output] == ["reasoning", "function_call"]
    assert response.output[0].summary[0].text == THOUGHT
    assert response.usage.output_tokens_details.reasoning_tokens == _thought_tokens()
    assert answer.output_text == ANSWER and answer.output[0].summary == []
    assert answer.usage.output_tokens_details.reasoning_tokens == HIDDEN


def _message(client: anthropic.Anthropic, kwargs: dict, stream: bool) -> anthropic.types.Message:
    """The SDK's message, read whole or assembled from its stream."""
    if stream:
        with client.messages.stream(**kwargs) as events:
            return events.get_final_message()
    return client.messages.create(**kwargs)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_messages_start_with_a_signed_thinking_block(url, stream):
    with anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=0) as client:
        kwargs = {"model": "ponder", "max_tokens": 500, "messages": QUESTION, "tools": MESSAGES_TOOLS}
        message = _message(client, kwargs, stream)
        answer = client.messages.create(**{**kwargs, "messages": [
            *QUESTION, {"role": "assistant", "content": [b.model_dump() for b in message.content]},
            {"role": "user",
             "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "errors.log"}]}]})
    thinking, call = message.content
    assert (thinking.type, thinking.thinking, call.type) == ("thinking", THOUGHT, "tool_use")
    assert len(thinking.signature) > 20
    assert message.usage.output_tokens == _thought_tokens() + _call_tokens()
    assert message.usage.output_tokens_details.thinking_tokens == _thought_tokens()
    assert [b.type for b in answer.content] == ["redacted_thinking", "text"]
    assert answer.usage.output_tokens_details.thinking_tokens == HIDDEN


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_messages_cut_while_thinking_hold_the_thinking_block_only(url, stream):
    """The real API sends no empty text block (and refuses one sent back in a request)."""
    with anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=0) as client:
        kwargs = {"model": "ponder", "max_tokens": 5, "messages": QUESTION, "tools": MESSAGES_TOOLS}
        message = _message(client, kwargs, stream)
    assert message.stop_reason == "max_tokens"
    assert [b.type for b in message.content] == ["thinking"]
    assert message.usage.output_tokens == message.usage.output_tokens_details.thinking_tokens == 5
