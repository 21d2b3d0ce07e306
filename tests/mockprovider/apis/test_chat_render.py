"""`chat.render` writes a completion from a template: its bytes must be JSONResponse's own."""

from __future__ import annotations

import json

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


def test_a_reply_echoing_a_lone_surrogate_is_rendered_as_a_json_escape() -> None:
    c = completions.Completion(
        id="chatcmpl-x", created=1_700_000_000, model="plan", content="odd \ud800",
        tool_calls=(ToolCall(id="c\udc00", name="n", arguments="{}"),), finish_reason="stop",
        prompt_tokens=1, completion_tokens=1,
    )
    decoded = json.loads(chat.render(c))
    assert decoded["choices"][0]["message"]["content"] == "odd \ud800"
    assert decoded["choices"][0]["message"]["tool_calls"][0]["id"] == "c\udc00"


def test_a_kept_message_and_count_serve_only_the_calls_they_were_made_from(monkeypatch) -> None:
    """Replies' calls are kept by identity: each reply, rendered and counted again and in turn,
    and again after the memory filled and was emptied, reads as a fresh one would."""
    monkeypatch.setattr(chat, "MESSAGES_KEPT", 2)
    monkeypatch.setattr(completions, "CALLS_KEPT", 2)
    replies = [Reply(tool_calls=CALLS[:1]), Reply(tool_calls=CALLS), Reply(tool_calls=(CALLS[1],)),
               Reply(tool_calls=tuple(CALLS[:1]))]
    fresh = []
    for reply in replies:
        c = completions.complete(reply, model="m", prompt_tokens=10, max_tokens=None)
        fresh.append((c.completion_tokens, JSONResponse(chat.body(c)).body))
    for _ in range(3):
        for reply, (tokens, rendered) in zip(replies, fresh, strict=True):
            c = completions.complete(reply, model="m", prompt_tokens=10, max_tokens=None)
            c = c._replace(id=json.loads(rendered)["id"], created=json.loads(rendered)["created"])
            assert (c.completion_tokens, chat.render(c)) == (tokens, rendered)
