"""The chat-body parser that reuses remembered transcripts: always json.loads' answer, exact counts."""

from __future__ import annotations

import json

import httpx
import pytest

import o200k
from experiments.bench.floor import runaway_messages
from mockprovider.reading import memo
from mockprovider.reading.memo import Memory
from mockprovider.reading.transcript import EMPTY

LONG = runaway_messages(30)  # ~9 KB of JSON: past memo.KEY_CHARS


def _bodies() -> list[bytes]:
    base = {"model": "runaway", "messages": LONG}
    text = json.dumps(base)
    return [
        text.encode(),
        json.dumps(base, indent=2).encode(),
        json.dumps(base, separators=(",", ":")).encode(),
        json.dumps({"messages": LONG, "model": "runaway", "tools": [{"type": "function"}]}).encode(),
        # The last of two "messages" keys wins, as in json.loads.
        json.dumps({"messages": LONG})[:-1].encode() + b', "messages": [{"role": "user", "content": "x"}]}',
        json.dumps({"messages": LONG})[:-1].encode() + b', "messages": "not an array"}',
        json.dumps({"x": {"messages": [1, 2]}, "messages": LONG}).encode(),
        b" \t\r\n" + text.encode() + b" \n",
        json.dumps(base, ensure_ascii=False).replace("files", "fichiers ü").encode(),
        b"\xef\xbb\xbf" + text.encode(),  # a BOM: json.loads reads it as utf-8-sig
        text.encode("utf-16"),
    ]


BROKEN = [
    json.dumps({"messages": LONG}).encode()[:-2] + b",]}",  # trailing comma in the array
    json.dumps({"messages": LONG}).encode()[:-1] + b",}",  # trailing comma in the object
    json.dumps({"messages": LONG}).encode() + b"x",  # extra data
    json.dumps({"messages": LONG}).encode()[:-1],  # cut off
    json.dumps({"messages": LONG}).encode().replace(b"system", b"sys\xfftem"),  # not UTF-8
]


SHORT = json.dumps({"model": "plan", "messages": [{"role": "user", "content": "hi ü"}]}, ensure_ascii=False)
"""Below memo.KEY_CHARS: parsed without json.loads' encoding detection when it starts with '{'."""
SHORT_BODIES = [
    SHORT.encode(),
    b"{}",
    b"{ }",
    SHORT.encode() + b" \n",
    SHORT.encode("utf-16-le"),  # '{' then a zero byte: detected as UTF-16
    SHORT.encode("utf-16"),
    b"\xef\xbb\xbf" + SHORT.encode(),
]
SHORT_BROKEN = [
    b"{", b"{,}", SHORT.encode() + b"x", SHORT.encode()[:-1], SHORT.encode().replace(b"hi", b"h\xff"),
]


@pytest.mark.parametrize("body", SHORT_BODIES)
def test_a_short_body_parses_as_json_loads_parses_it(body):
    assert memo.parse(body) == (json.loads(body), None)


@pytest.mark.parametrize("body", SHORT_BROKEN)
def test_a_short_broken_body_fails_as_json_loads_fails(body):
    with pytest.raises((ValueError, RecursionError)) as expected:
        json.loads(body)
    with pytest.raises(type(expected.value)):
        memo.parse(body)


@pytest.mark.parametrize("remembered", [False, True])
def test_parse_answers_what_json_loads_answers(remembered):
    memory = Memory()
    if remembered:
        for body in _bodies():
            _, known = memo.parse(body, memory)
            if known:
                known.remember(EMPTY)  # any summary: these tests are about parsing
    for body in _bodies():
        assert memo.parse(body, memory)[0] == json.loads(body)
    for body in BROKEN:
        with pytest.raises((ValueError, RecursionError)) as expected:
            json.loads(body)
        with pytest.raises(type(expected.value)):
            memo.parse(body, memory)


def test_a_grown_transcript_reads_only_its_new_messages():
    memory = Memory()
    first = json.dumps({"model": "runaway", "messages": runaway_messages(30)}).encode()
    grown = json.dumps({"model": "runaway", "messages": runaway_messages(31)}).encode()
    body, known = memo.parse(first, memory)
    known.remember(EMPTY)
    body, known = memo.parse(grown, memory)
    assert known.count == len(runaway_messages(30)) and body == json.loads(grown)


def test_memory_keeps_to_its_entry_and_byte_bounds():
    memory = Memory(max_entries=3, max_bytes=10 << 20)
    for n in range(10):
        body = json.dumps({"messages": runaway_messages(20, task=f"task {n}")}).encode()
        parsed, known = memo.parse(body, memory)
        known.remember(EMPTY)
    entries, held = memory.stats()
    assert entries == 3 and held <= 10 << 20


def test_server_bills_exact_prompt_tokens_as_long_conversations_grow(mock_url):
    """Past memo.KEY_CHARS every turn is read from memory; the bill must not move by a token."""
    with httpx.Client(base_url=mock_url) as client:
        for turn in range(0, 40, 3):
            for task in ("a", "b"):
                messages = runaway_messages(turn, task=f"Which file mentions a timeout? ({task})")
                tools = [{"type": "function", "function": {"name": "list_files", "parameters": {}}}]
                for body in ({"model": "runaway", "messages": messages},
                             {"model": "runaway", "messages": messages, "tools": tools}):
                    response = client.post("/chat/completions", json=body)
                    assert response.status_code == 200, response.text
                    expected = o200k.prompt_tokens(messages, body.get("tools"))
                    assert response.json()["usage"]["prompt_tokens"] == expected
