"""Several tool calls in one reply, streamed as the APIs stream them: each with its index, one
after another (none of the three APIs interleaves them), arguments split at the `chunk` option
(tokens per delta)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import openai
import pytest
from mock_support import serve_scripts

from mockprovider.replies import completions
from mockprovider.scripts.scenarios import Conversation, Reply, ToolCall

CALLS = (
    ToolCall(id="c1", name="read_file", arguments='{"path":"errors.log"}'),
    ToolCall(id="c2", name="read_file", arguments='{"path":"access.log"}'),
    ToolCall(id="c3", name="list_files", arguments="{}"),
)
QUESTION = [{"role": "user", "content": "Read both logs and list the folder."}]
NAMES = ("list_files", "read_file")
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in NAMES]
RESPONSES_TOOLS = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in NAMES]
MESSAGES_TOOLS = [{"name": n, "input_schema": {"type": "object"}} for n in NAMES]
"""Offered in every request: a real model calls only tools it is offered, and so does the mock."""


def _deltas_per_call(chunk: int) -> list[int]:
    """How many argument deltas each call streams as, `chunk` tokens each."""
    return [-(-len(completions.token_pieces(c.arguments)) // chunk) for c in CALLS]


def fanout(c: Conversation) -> Reply:
    """Asks three tools at once, then answers."""
    return Reply(tool_calls=CALLS) if c.turn == 0 else Reply(content="Done.")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_scripts(fanout=fanout) as base:
        yield base


def test_chat_streams_each_call_under_its_index_in_chunks(url):
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        request = {"model": "fanout+chunk=4", "messages": QUESTION, "tools": CHAT_TOOLS}
        chunks = list(client.chat.completions.create(**request, stream=True))
        with client.chat.completions.stream(**request) as stream:
            final = stream.get_final_completion()
    deltas = [(t.index, t.function.arguments)
              for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or ()]
    indexes = [i for i, _ in deltas]
    assert indexes == sorted(indexes) and set(indexes) == {0, 1, 2}  # one call after another
    assert [sum(1 for i, a in deltas if i == k and a) for k in range(3)] == _deltas_per_call(4)
    joined = ["".join(a for i, a in deltas if i == k) for k in range(3)]
    assert joined == [c.arguments for c in CALLS]
    calls = final.choices[0].message.tool_calls
    assert [(t.id, t.function.name, t.function.arguments) for t in calls] == [
        (c.id, c.name, c.arguments) for c in CALLS]


def test_responses_stream_one_function_call_item_per_call(url):
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        events = list(client.responses.create(model="fanout+chunk=5", input=QUESTION, tools=RESPONSES_TOOLS,
                                              stream=True))
    deltas = [(e.output_index, e.delta) for e in events if e.type == "response.function_call_arguments.delta"]
    assert [i for i, _ in deltas] == sorted(i for i, _ in deltas)
    assert [sum(1 for i, _ in deltas if i == k) for k in range(3)] == _deltas_per_call(5)
    output = events[-1].response.output
    assert [(o.call_id, o.arguments) for o in output] == [(c.id, c.arguments) for c in CALLS]


def test_messages_stream_one_tool_use_block_per_call(url):
    with anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=0) as client:
        with client.messages.stream(model="fanout+chunk=3", max_tokens=500, messages=QUESTION,
                                    tools=MESSAGES_TOOLS) as stream:
            events = list(stream)
            message = stream.get_final_message()
    partial = [(e.index, e.delta.partial_json) for e in events
               if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert [i for i, _ in partial] == sorted(i for i, _ in partial)
    assert [sum(1 for i, _ in partial if i == k) for k in range(3)] == _deltas_per_call(3)
    assert [(b.id, b.input) for b in message.content] == [(c.id, json.loads(c.arguments)) for c in CALLS]
