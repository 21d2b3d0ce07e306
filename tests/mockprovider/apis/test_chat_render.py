"""`chat.render` writes a completion from a template: its bytes must be JSONResponse's own."""

from __future__ import annotations

import pytest
from starlette.responses import JSONResponse

from mockprovider.apis import chat
from mockprovider.replies import completions
from mockprovider.scripts.scenarios import Reply, ToolCall, Usage

CALLS = (
    ToolCall(id="c1", name="list_files", arguments="{}"),
    ToolCall(id='c"2\\', name="read_\u00e9", arguments='{"path":"caf\u00e9\\n\u2028.log"}'),
)


@pytest.mark.parametrize(
    ("content", "calls", "finish"),
    [
        ("plain answer", (), "stop"),
        ("", (), "length"),
        ('quotes " and \\ and \n\t\u0001 controls, caf\u00e9 \U0001f600 \u2028', (), "stop"),
        (None, CALLS[:1], "tool_calls"),
        (None, CALLS, "length"),
    ],
)
def test_render_is_byte_for_byte_what_jsonresponse_renders(content, calls, finish) -> None:
    c = completions.Completion(
        id="chatcmpl-\u00e9x", created=1_700_000_000, model='runaway+fault="x"', content=content,
        tool_calls=calls, finish_reason=finish, prompt_tokens=123_456, completion_tokens=7,
    )
    assert chat.render(c) == JSONResponse(chat.body(c)).body


def test_recorded_usage_keeps_reasoning_a_part_of_the_completion() -> None:
    reply = Reply(content="Hello.", reasoning=500, usage=Usage(prompt_tokens=40, completion_tokens=22))
    c = completions.complete(reply, model="m", prompt_tokens=40, max_tokens=None)
    assert c.completion_tokens == 22
    assert 0 <= c.reasoning_tokens <= c.completion_tokens


@pytest.mark.parametrize("content", ["", None])
def test_reasoning_cut_by_max_tokens_finishes_for_length_even_with_nothing_to_say(content) -> None:
    for reasoning in (500, "word " * 500):
        reply = Reply(content=content, reasoning=reasoning)
        c = completions.complete(reply, model="m", prompt_tokens=9, max_tokens=100)
        assert (c.finish_reason, c.completion_tokens, c.reasoning_tokens) == ("length", 100, 100)
