"""Prompt caching, stateless: the official clients read cached usage as from the real APIs.

OpenAI's rule (automatic, from 1,024 tokens, in steps of 128) is checked on Chat Completions and
Responses; Anthropic's (only at `cache_control` breakpoints, split by TTL, additive to
`input_tokens`) on Messages; plain and streamed.
"""

from __future__ import annotations

import anthropic
import openai
import pytest
from mock_support import serve_scripts

from mockprovider.replies.caching import OPENAI_MIN_TOKENS, OPENAI_STEP_TOKENS
from mockprovider.scripts.scenarios import Reply, Usage

LONG_SYSTEM = " ".join(f"Rule {i}: check the log before answering." for i in range(160))
QUESTION = "Which file mentions a timeout?"


def _chat_turns(n: int) -> list[list[dict]]:
    """The requests of `runaway`'s first n turns: each the previous one, its call and the result."""
    messages: list[dict] = [{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": QUESTION}]
    turns = [list(messages)]
    for t in range(1, n):
        call = {"id": f"c{t - 1}", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{t - 1}", "content": "errors.log\naccess.log"}]
        turns.append(list(messages))
    return turns


def _floor(tokens: int) -> int:
    return tokens - tokens % OPENAI_STEP_TOKENS if tokens >= OPENAI_MIN_TOKENS else 0


def _chat_usage(client: openai.OpenAI, model: str, messages: list[dict], stream: bool):
    if not stream:
        return client.chat.completions.create(model=model, messages=messages).usage
    chunks = list(client.chat.completions.create(
        model=model, messages=messages, stream=True, stream_options={"include_usage": True}))
    return chunks[-1].usage


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_turn_reads_the_previous_turns_prompt_from_the_cache(mock_url, stream):
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        usages = [_chat_usage(client, "runaway", m, stream) for m in _chat_turns(3)]
    assert usages[0].prompt_tokens > OPENAI_MIN_TOKENS
    cached = [u.prompt_tokens_details.cached_tokens for u in usages]
    assert cached == [0, _floor(usages[0].prompt_tokens), _floor(usages[1].prompt_tokens)]
    assert cached[1] % OPENAI_STEP_TOKENS == 0 and 0 < cached[1] <= usages[0].prompt_tokens


def test_a_prompt_under_the_minimum_is_never_cached(mock_url):
    short = [{"role": "user", "content": QUESTION},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c0", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c0", "content": "errors.log"}]
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        usage = client.chat.completions.create(model="runaway", messages=short).usage
    assert usage.prompt_tokens < OPENAI_MIN_TOKENS
    assert usage.prompt_tokens_details.cached_tokens == 0


def test_cache_off_and_a_scripted_miss_read_nothing(mock_url):
    turns = _chat_turns(3)
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        def cached(model: str) -> list[int]:
            return [client.chat.completions.create(model=model, messages=m).usage
                    .prompt_tokens_details.cached_tokens for m in turns]
        on, off, missed = cached("runaway"), cached("runaway+cache=off"), cached("runaway+cache=miss@1")
    assert on[2] >= on[1] > 0
    assert off == [0, 0, 0]
    assert missed == [0, 0, on[2]]  # the miss costs one turn; the next reads what the miss wrote


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_responses_report_the_same_cached_tokens_as_chat(mock_url, stream):
    turns = _chat_turns(2)
    items = [{"role": "user", "content": QUESTION},
             {"type": "function_call", "call_id": "c0", "name": "list_files", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c0", "output": "errors.log\naccess.log"}]
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        chat = client.chat.completions.create(model="runaway", messages=turns[1]).usage
        kwargs = {"model": "runaway", "instructions": LONG_SYSTEM, "input": items}
        if stream:
            with client.responses.stream(**kwargs) as events:
                usage = events.get_final_response().usage
        else:
            usage = client.responses.create(**kwargs).usage
    assert usage.input_tokens == chat.prompt_tokens
    assert usage.input_tokens_details.cached_tokens == chat.prompt_tokens_details.cached_tokens > 0


# --- Anthropic: explicit breakpoints ---------------------------------------------------------


def _anthropic(mock_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=mock_url.removesuffix("/v1"), api_key="unused", max_retries=0)


def _message_turns() -> list[dict]:
    """Two turns of a loop that marks its system prompt (1 h) and, moving, its last message."""
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    mark = {"type": "ephemeral"}
    first = [{"role": "user", "content": [{"type": "text", "text": QUESTION, "cache_control": mark}]}]
    second = [
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
        {"role": "assistant",
         "content": [{"type": "tool_use", "id": "c0", "name": "list_files", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c0", "content": "errors.log",
                                      "cache_control": mark}]},
    ]
    return [{"system": system, "messages": first}, {"system": system, "messages": second}]


def _message_usage(client: anthropic.Anthropic, model: str, request: dict, stream: bool):
    kwargs = {"model": model, "max_tokens": 100, **request}
    if not stream:
        return client.messages.create(**kwargs).usage
    with client.messages.stream(**kwargs) as events:
        return events.get_final_message().usage


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_messages_write_at_breakpoints_then_read_what_the_previous_turn_wrote(mock_url, stream):
    with _anthropic(mock_url) as client:
        first, second = (_message_usage(client, "runaway", r, stream) for r in _message_turns())
        uncached = [_message_usage(client, "runaway+cache=off", r, stream) for r in _message_turns()]
    assert (first.cache_read_input_tokens, second.cache_read_input_tokens) == (
        0, first.cache_creation_input_tokens)
    assert first.cache_creation.ephemeral_1h_input_tokens > 1024  # the system prompt, marked 1h
    assert first.cache_creation.ephemeral_5m_input_tokens > 0  # the question, marked 5m
    assert second.cache_creation_input_tokens == second.cache_creation.ephemeral_5m_input_tokens > 0
    for cached, plain in zip((first, second), uncached, strict=True):
        # Additive: input_tokens is only what neither read nor wrote the cache.
        billed = cached.input_tokens + cached.cache_read_input_tokens + cached.cache_creation_input_tokens
        assert billed == plain.input_tokens and cached.input_tokens < plain.input_tokens
        assert plain.cache_read_input_tokens == plain.cache_creation_input_tokens == 0


def test_messages_without_breakpoints_are_never_cached(mock_url):
    requests = _message_turns()
    for r in requests:
        r["system"] = LONG_SYSTEM
        r["messages"][-1]["content"][0].pop("cache_control")
    with _anthropic(mock_url) as client:
        usage = _message_usage(client, "runaway", requests[1], stream=False)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


def test_a_scripted_miss_writes_the_whole_prefix_again(mock_url):
    with _anthropic(mock_url) as client:
        first, _ = (_message_usage(client, "runaway", r, False) for r in _message_turns())
        missed = _message_usage(client, "runaway+cache=miss@1", _message_turns()[1], False)
        hit = _message_usage(client, "runaway", _message_turns()[1], False)
    assert missed.cache_read_input_tokens == 0
    rewritten = hit.cache_creation_input_tokens + first.cache_creation_input_tokens
    assert missed.cache_creation_input_tokens == rewritten


def _answered_with(request: dict, block: dict) -> None:
    """`request` continued by an assistant turn that opens with `block`, marked for caching."""
    marked = {**block, "cache_control": {"type": "ephemeral"}}
    request["messages"] += [{"role": "assistant", "content": [marked, {"type": "text", "text": "ok"}]},
                            {"role": "user", "content": "go on"}]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: r["messages"][0]["content"].extend(
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}} for _ in range(4)),
     "A maximum of 4 blocks with cache_control may be provided. Found 6."),
    (lambda r: r.update(system=[{**r["system"][0], "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                        tools=[{"name": "list_files", "input_schema": {"type": "object"},
                                "cache_control": {"type": "ephemeral", "ttl": "5m"}}]),
     "must not come after a ttl='5m'"),
    (lambda r: r["system"][0].update(cache_control={"type": "persistent"}), "cache_control"),
    (lambda r: r["system"][0].update(cache_control={"type": "ephemeral", "ttl": "1h", "scope": "global"}),
     "system[0].cache_control.scope: Extra inputs are not permitted"),
    # Thinking blocks cannot be marked (the SDK's ThinkingBlockParam has no cache_control).
    (lambda r: _answered_with(r, {"type": "thinking", "thinking": "t", "signature": "s"}),
     "messages[1].content[0].cache_control: Extra inputs are not permitted"),
    (lambda r: _answered_with(r, {"type": "redacted_thinking", "data": "d"}),
     "messages[1].content[0].cache_control: Extra inputs are not permitted"),
])
def test_breakpoints_are_checked_as_anthropic_checks_them(mock_url, mutate, message):
    request = _message_turns()[0]
    mutate(request)
    with _anthropic(mock_url) as client, pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="runaway", max_tokens=100, **request)
    assert message in caught.value.message


def test_a_recorded_prompt_under_the_minimum_reads_nothing_from_the_cache():
    """`usage=recorded` serves a recording's shorter prompt: a prompt under 1,024 tokens is never
    cached, so its recorded figures carry no cache read or write (not a read floored to 128)."""
    recorded = Usage(prompt_tokens=OPENAI_MIN_TOKENS - 24, completion_tokens=5)
    turns = _chat_turns(2)
    with serve_scripts(recorded=lambda c: Reply(content="ok", usage=recorded)) as url:
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
            counted = client.chat.completions.create(model="recorded", messages=turns[1]).usage
            served = client.chat.completions.create(model="recorded+usage=recorded", messages=turns[1]).usage
        request = _message_turns()[1]
        with _anthropic(url) as client:
            message = client.messages.create(model="recorded+usage=recorded", max_tokens=100, **request).usage
    assert counted.prompt_tokens_details.cached_tokens >= OPENAI_MIN_TOKENS  # the counted prompt is cached
    assert (served.prompt_tokens, served.prompt_tokens_details.cached_tokens) == (recorded.prompt_tokens, 0)
    assert (message.input_tokens, message.cache_read_input_tokens, message.cache_creation_input_tokens) == (
        recorded.prompt_tokens, 0, 0)


DYNAMIC = " ".join(f"Note {i}: today's log rotated at 0{i % 10}:00." for i in range(60))
"""A block a loop sends after its marked, static one (a date, a fresh note): not cached."""


def _marked_then_unmarked(where: str, later: bool) -> dict:
    """A request marking LONG_SYSTEM's block, in the system prompt, the user message or a
    tool_result's content, with (`later`) or without an unmarked block after it in the same part."""
    marked = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    blocks = marked + ([{"type": "text", "text": DYNAMIC}] if later else [])
    if where == "system":
        return {"system": blocks, "messages": [{"role": "user", "content": QUESTION}]}
    if where == "tool_result":
        call = {"type": "tool_use", "id": "c0", "name": "list_files", "input": {}}
        return {"messages": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": [call]},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c0",
                                                           "content": blocks}]}]}
    return {"messages": [{"role": "user", "content": blocks}]}


@pytest.mark.parametrize("where", ["system", "user", "tool_result"])
def test_a_breakpoint_caches_up_to_its_own_block_not_the_blocks_after_it(mock_url, where):
    with _anthropic(mock_url) as client:
        alone, followed = (_message_usage(client, "runaway", _marked_then_unmarked(where, later), False)
                           for later in (False, True))
    assert alone.cache_creation_input_tokens > OPENAI_MIN_TOKENS
    assert followed.cache_creation_input_tokens == alone.cache_creation_input_tokens
    assert followed.input_tokens > alone.input_tokens  # the later block is billed as plain input
