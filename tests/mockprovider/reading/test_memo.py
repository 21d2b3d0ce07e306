"""The chat-body parser that reuses remembered transcripts: always json.loads' answer, exact counts."""

from __future__ import annotations

import asyncio
import bisect
import copy
import json
import random
import re
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import o200k
from experiments.bench.floor import runaway_messages
from mockprovider import create_app
from mockprovider.reading import memo
from mockprovider.reading.memo import Memory
from mockprovider.reading.transcript import EMPTY

LONG = runaway_messages(30)  # ~9 KB of JSON: past memo.MIN_CHARS


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
"""Below memo.MIN_CHARS: parsed by orjson unless it refuses the body, then by json.loads."""
SHORT_BODIES = [
    SHORT.encode(),
    b"{}",
    b"{ }",
    SHORT.encode() + b" \n",
    SHORT.encode("utf-16-le"),  # '{' then a zero byte: detected as UTF-16
    SHORT.encode("utf-16"),
    b"\xef\xbb\xbf" + SHORT.encode(),
]
LOOKALIKES = [
    b'{"max_tokens": 18446744073709551616}',  # past 64 bits: an int to json.loads, never a float
    b'{"n": -9223372036854775809, "x": 12345678901234567890123}',
    b'{"temperature": NaN, "top_p": Infinity}',
    b'{"x": 1e400, "y": -0.0, "z": 1.0, "w": 1}',
    b'{"content": "\\ud800 alone"}',  # a lone surrogate, escaped
    b'{"a": 1, "a": 2.5}',
    b'{"digits": "1234567890123456789012345"}',  # a long run in a string: read by the stdlib, same value
]
"""Short bodies where a faster parser could answer another value or type than json.loads."""
SHORT_BROKEN = [
    b"{", b"{,}", SHORT.encode() + b"x", SHORT.encode()[:-1], SHORT.encode().replace(b"hi", b"h\xff"),
]


@pytest.mark.parametrize("body", SHORT_BODIES)
def test_a_short_body_parses_as_json_loads_parses_it(body):
    assert memo.parse(body) == (json.loads(body), None)


@pytest.mark.parametrize("body", LOOKALIKES)
def test_a_short_body_reads_as_json_loads_reads_it_types_included(body):
    value, known = memo.parse(body)
    assert known is None and repr(value) == repr(json.loads(body))  # repr: 1 is not 1.0, nan is nan


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON, st.booleans())
def test_any_short_json_reads_as_json_loads_reads_it(value, ascii_only):
    body = json.dumps({"v": value}, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        expected = repr(json.loads(body))
    except ValueError as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            memo.parse(body)
        return
    assert repr(memo.parse(body)[0]) == expected


@pytest.mark.parametrize("body", SHORT_BROKEN)
def test_a_short_broken_body_fails_as_json_loads_fails(body):
    with pytest.raises((ValueError, RecursionError)) as expected:
        json.loads(body)
    with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
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


def _turn(memory: Memory, messages: list, model: str = "runaway") -> int:
    """One request through `memory`, remembered as serving it would: how many messages it found."""
    raw = json.dumps({"model": model, "messages": messages}).encode()
    body, known = memo.parse(raw, memory)
    assert body == json.loads(raw)
    if known is not None:
        known.remember(EMPTY)
        return known.count
    return 0


def test_a_conversation_holds_one_entry_however_long_it_runs():
    memory = Memory()
    for turn in range(8, 40):
        assert _turn(memory, runaway_messages(turn)) == len(runaway_messages(turn - 1)) or turn == 8
    assert memory.stats()[0] == 1


def test_as_many_conversations_as_entries_all_read_from_memory_turn_after_turn():
    """A loop over N conversations (each request extends that conversation's previous one) fits in
    N entries: an entry kept beside the one extending it would push out the next conversation's."""
    conversations = 12
    memory = Memory(max_entries=conversations)
    found = [[_turn(memory, runaway_messages(turn, task=f"task {k}")) for k in range(conversations)]
             for turn in range(8, 16)]
    assert found[1:] == [[len(runaway_messages(turn - 1))] * conversations for turn in range(9, 16)]


def test_with_more_conversations_than_entries_those_held_stay_read_from_memory():
    """A loop over more conversations than the memory holds asks for each entry just after it became
    the least recently used: the full memory keeps the ones it holds rather than evict them all."""
    memory = Memory(max_entries=8)
    found = [sum(_turn(memory, runaway_messages(turn, task=f"task {k}")) > 0 for k in range(12))
             for turn in range(8, 20)]
    assert found[1:] == [8] * (len(found) - 1)


def test_entries_of_a_run_that_ended_age_out_as_a_new_run_goes():
    memory = Memory(max_entries=8)
    for turn in range(8, 10):
        for k in range(8):
            _turn(memory, runaway_messages(turn, task=f"first run {k}"))
    found = [sum(_turn(memory, runaway_messages(turn, task=f"second run {k}")) > 0 for k in range(8))
             for turn in range(8, 8 + 4 * memo.ADMIT_EVERY)]
    assert found[0] == 0 and found[-1] == 8


def test_a_memory_full_of_runs_that_ended_reads_a_new_run_from_memory_within_a_few_turns():
    """Entries not found in `STALE_AFTER` lookups per entry held are runs that ended: a new run takes
    their places at once, not one transcript in `ADMIT_EVERY` (a long-lived mock serving run after
    run would read every new one in full)."""
    memory = Memory(max_entries=8)
    for run in ("first", "second"):
        for turn in range(8, 12):
            for k in range(8):
                _turn(memory, runaway_messages(turn, task=f"{run} run {k}"))
    found = [sum(_turn(memory, runaway_messages(turn, task=f"third run {k}")) > 0 for k in range(8))
             for turn in range(8, 14)]
    assert found[0] == 0 and found[3:] == [8, 8, 8]


def test_entries_unfound_for_a_while_make_room_for_a_new_run_however_short_the_runs():
    """Runs of a turn or two (too short for the lookup count to age anything) still give way to a
    new run once their entries went unfound for `STALE_SECONDS`."""
    now = [0.0]
    memory = Memory(max_entries=8, clock=lambda: now[0])
    for k in range(8):
        _turn(memory, runaway_messages(8, task=f"first run {k}"))

    def new_run(name: str) -> list[int]:
        return [sum(_turn(memory, runaway_messages(turn, task=f"{name} {k}")) > 0 for k in range(8))
                for turn in range(8, 10)]

    assert new_run("second run") == [0, 0]  # moments later: the first run may go on
    now[0] += memo.STALE_SECONDS + 1
    assert new_run("third run") == [0, 8]


@pytest.mark.parametrize("bound", ["entries", "bytes"])
def test_a_loop_over_more_conversations_than_the_memory_holds_keeps_its_entries_after_a_pause(bound):
    """A loop over more conversations than the memory holds that pauses past `STALE_SECONDS` (a
    benchmark warming another server, a slow model) finds every entry stale when it goes on, and
    asks for them in the order it left them: the least recently used first. What a miss admits,
    or an entry grows by, must not push out the entry asked next, or each miss makes the next and
    the whole turn is read in full."""

    turn_20 = memo.Entry(text=json.dumps(runaway_messages(20)), messages=[], summary=EMPTY)

    def loop(pause: bool) -> list[int]:
        now = [0.0]
        memory = (Memory(max_entries=8, clock=lambda: now[0]) if bound == "entries" else
                  Memory(max_bytes=8 * Memory.size(turn_20), clock=lambda: now[0]))
        found = []
        for turn in range(8, 23):
            if pause and turn == 20:
                now[0] += memo.STALE_SECONDS + 1
            found.append(sum(_turn(memory, runaway_messages(turn, task=f"task {k}")) > 0 for k in range(12)))
        return found[12:]

    steady, paused = loop(pause=False), loop(pause=True)
    assert steady == [8, 8, 8]
    # Each miss before the held entries are asked again costs one of them, once.
    assert paused[0] >= 5 and paused[1:] == steady[1:], paused


def test_a_rerun_reads_from_memory_however_many_runs_of_its_task_went_on_further():
    """Earlier runs of one task that went on past a turn (a rerun, a benchmark's rounds, each ending
    its own way) sort between a request of a new run and the turn before it (the request goes on
    past its messages with `]`, they with `,`): each turn of the new run still finds the one before
    it, not only when fewer than `WALK` such runs are held."""
    memory = Memory()
    for k in range(3 * memo.WALK):
        _turn(memory, [*runaway_messages(30), {"role": "user", "content": f"stop ({k})"}])
    assert memory.stats()[0] == 3 * memo.WALK
    found = [_turn(memory, runaway_messages(turn)) for turn in range(8, 30)]
    assert found[1:] == [len(runaway_messages(turn - 1)) for turn in range(9, 30)]


def test_a_retry_and_a_fork_of_a_remembered_transcript_read_as_json_loads_reads_them():
    """A resent request, an earlier turn resent after a later one, and two continuations of one
    transcript: each parses to what json.loads gives and finds only a transcript it begins with."""
    memory = Memory()
    base = runaway_messages(20)
    fork_a = [*base, {"role": "user", "content": "go on (a)"}]
    fork_b = [*base, {"role": "user", "content": "go on (b)"}]
    assert _turn(memory, base) == 0
    assert _turn(memory, base) == len(base)  # a retry: all of it remembered
    assert _turn(memory, fork_a) == len(base)
    assert _turn(memory, fork_a) == len(fork_a)
    assert _turn(memory, fork_b) == 0  # `base`'s entry went to `fork_a`: read in full, not wrongly
    assert _turn(memory, fork_b) == len(fork_b)
    assert _turn(memory, fork_a) == len(fork_a)  # both continuations held now
    assert _turn(memory, base) == 0  # the earlier turn after the later one: read in full
    assert _turn(memory, [*base, {"role": "user", "content": "go on (c)"}]) == len(base)


def test_a_retry_and_a_fork_are_answered_as_with_nothing_remembered(mock_url):
    """The replies (bill included) to resent and forked transcripts equal the replies a mock that
    remembers nothing gives them."""
    tools = [{"type": "function", "function": {"name": "list_files", "parameters": {}}}]
    base = runaway_messages(20, task="Which file mentions a timeout? (forks)")
    fork_a = [*base, {"role": "user", "content": "go on (a)"}]
    fork_b = [*base, {"role": "user", "content": "go on (b)"}]
    grown_b = [*fork_b, *runaway_messages(21)[len(base):]]
    sequence = [base, base, fork_a, fork_b, fork_a, grown_b, base, fork_b, grown_b]

    def answers(clear: bool) -> list[tuple[int, dict]]:
        out = []
        with httpx.Client(base_url=mock_url) as client:
            for messages in sequence:
                if clear:
                    memo.MEMORY.clear()
                response = client.post("/chat/completions", json={"model": "runaway", "messages": messages,
                                                                   "tools": tools})
                reply = {k: v for k, v in response.json().items() if k not in ("id", "created")}
                out.append((response.status_code, reply))
        return out

    remembered = answers(clear=False)
    assert remembered == answers(clear=True)
    assert all(status == 200 for status, _ in remembered)
    billed = [reply["usage"]["prompt_tokens"] for _, reply in remembered]
    assert billed == [o200k.prompt_tokens(messages, tools) for messages in sequence]


def test_memory_keeps_to_its_entry_and_byte_bounds():
    memory = Memory(max_entries=3, max_bytes=10 << 20)
    for n in range(10):
        body = json.dumps({"messages": runaway_messages(20, task=f"task {n}")}).encode()
        parsed, known = memo.parse(body, memory)
        known.remember(EMPTY)
    entries, held = memory.stats()
    assert entries == 3 and held <= 10 << 20


def test_server_bills_exact_prompt_tokens_as_long_conversations_grow(mock_url):
    """Past memo.MIN_CHARS every turn is read from memory; the bill must not move by a token."""
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


def _deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("where", ["new message", "other field"])
def test_a_grown_transcript_nesting_too_deep_after_its_remembered_part_is_refused(mock_url, where):
    """Past a remembered transcript the nesting is walked, not counted: too deep is still a 400."""
    tools = [{"type": "function", "function": {"name": "list_files", "parameters": {}}}]
    first = {"model": "runaway", "messages": runaway_messages(30), "tools": tools}
    grown = {"model": "runaway", "messages": runaway_messages(31), "tools": tools}
    if where == "new message":
        grown["messages"][-1]["content"] = [{"type": "text", "text": "x", "extra": _deep(70)}]
    else:
        grown["x_unread"] = _deep(70)
    with httpx.Client(base_url=mock_url) as client:
        assert client.post("/chat/completions", json=first).status_code == 200
        refused = client.post("/chat/completions", json=grown)
        shallow = client.post("/chat/completions", json={**grown, "x_unread": _deep(60)}
                              if where == "other field" else first)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "too_deep"
    assert shallow.status_code == 200, shallow.text


@pytest.mark.parametrize("where", ["new message", "field before the messages", "field after them"])
def test_a_lone_surrogate_past_a_remembered_transcript_is_refused_naming_its_string(mock_url, where):
    """The remembered messages' bytes are not searched again; every other byte still is."""
    tools = [{"type": "function", "function": {"name": "list_files", "parameters": {}}}]
    messages = runaway_messages(30)
    messages[1]["content"] += " (caf\u00e9 \U0001f600)"  # valid escapes in the remembered part
    first = {"model": "runaway", "messages": messages, "tools": tools}
    grown_messages = [*messages, *runaway_messages(31)[len(messages):]]
    lone, param = "x \ud800 y", {"new message": f"messages[{len(grown_messages) - 1}].content",
                                 "field before the messages": "user", "field after them": "user"}[where]
    if where == "new message":
        grown_messages[-1] = {**grown_messages[-1], "content": lone}
        grown = {"model": "runaway", "messages": grown_messages, "tools": tools}
    elif where == "field before the messages":
        grown = {"model": "runaway", "user": lone, "messages": grown_messages, "tools": tools}
    else:
        grown = {"model": "runaway", "messages": grown_messages, "tools": tools, "user": lone}
    raw = json.dumps(grown).encode()  # ensure_ascii: the lone surrogate as a \ud800 escape
    with httpx.Client(base_url=mock_url) as client:
        assert client.post("/chat/completions", json=first).status_code == 200
        refused = client.post("/chat/completions", content=raw, headers={"content-type": "application/json"})
        grown_ok = client.post("/chat/completions", json={**grown, "user": "ok"} if where != "new message"
                               else {**grown, "messages": [*messages, *runaway_messages(31)[len(messages):]]})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param
    assert grown_ok.status_code == 200, grown_ok.text


# --- the memory under attack: random operations, and answers against an empty memory ----------

_PIECES = ["a", "1", "10", '"', '\\"', "\\", ",", "}", "]", " ", "é", "\U0001f600", "\ud800", "\uffff"]
"""Where two texts may part: mid-number, mid-escape, at a delimiter, at astral or surrogate code points."""


def _text(rng: random.Random, held: list[str]) -> str:
    """A text past memo.MIN_CHARS: often a held one cut somewhere and continued, else a fresh one."""
    if held and rng.random() < 0.8:
        base = rng.choice(held)
        base = base[: rng.randrange(len(base) + 1)] if rng.random() < 0.3 else base
    else:
        base = "x" * rng.choice([memo.MIN_CHARS - 1, memo.MIN_CHARS, memo.MIN_CHARS + 1])
    return base + "".join(rng.choice(_PIECES) for _ in range(rng.randrange(40)))


@pytest.mark.parametrize("seed", range(4))
def test_memory_stays_consistent_through_random_remembering_replacing_and_finding(seed):
    """Sorted, one entry per text, its byte estimate the sum of the live entries', within its bounds;
    a found text is always one the request begins with, the longest when the walk reaches it."""
    rng = random.Random(seed)
    memory = Memory(max_entries=rng.choice([3, 8, 40]), max_bytes=rng.choice([200_000, 1 << 20]))
    offered: list[memo.Entry] = []
    for _ in range(3000):
        texts = memory._texts
        if rng.random() < 0.45:
            entry = memo.Entry(text=_text(rng, texts), messages=[], summary=EMPTY)
            memory.remember(entry, rng.choice(offered) if offered and rng.random() < 0.6 else None)
            offered = [*offered[-100:], entry]
        elif rng.random() < 0.98:
            q = _text(rng, texts)
            found = memory.find("pre" + q, 3)
            prefixes = [t for t in texts if q.startswith(t)]
            if found is not None:
                assert q.startswith(found.text) and len(q) >= memo.MIN_CHARS
            if prefixes and bisect.bisect_right(texts, q) - texts.index(max(prefixes, key=len)) <= memo.WALK:
                assert found is not None and found.text == max(prefixes, key=len)
        else:
            memory.clear()
        entries = memory._entries
        assert memory._texts == sorted(set(memory._texts)) == [e.text for e in entries]
        assert list(memory._lru) and sorted(memory._lru) == sorted(map(id, entries)) or not entries
        assert memory.stats() == (len(entries), sum(map(Memory.size, entries)))
        assert len(entries) <= memory.max_entries and memory.stats()[1] <= memory.max_bytes


_SYSTEM = "You are a careful assistant with file tools. " * 46  # ~2 KB: every transcript is remembered
_TOOLS = [{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}}]


def _agent_bodies(seed: int, requests: int) -> list[bytes]:
    """Requests of a few agent loops, interleaved: turns that extend, retries, forks from an earlier
    turn, edits in the middle (a digit, a quote, a backslash added), other tools or model, and each
    body written its own way (compact, indented, non-ASCII unescaped)."""
    rng = random.Random(seed)
    runs: list[tuple[dict, list]] = []
    ids = iter(range(10**6))
    bodies = []
    for _ in range(requests):
        if not runs or rng.random() < 0.1:
            task = {"role": "user", "content": f"task {len(runs)}"}
            runs.append(({"model": rng.choice(["runaway", "plan", "recover"]), "tools": _TOOLS},
                         [{"role": "system", "content": _SYSTEM}, task]))
        k = rng.randrange(len(runs))
        fields, messages = runs[k]
        action = rng.random()
        if action < 0.55 or len(messages) < 4:
            messages = copy.deepcopy(messages)
            call = f"call_{next(ids)}"
            asked = {"id": call, "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
            result = rng.choice(["1", "10", 'a "b"', "c\\", "é 😀"])
            messages += [{"role": "assistant", "content": None, "tool_calls": [asked]},
                         {"role": "tool", "tool_call_id": call, "content": result}]
        elif action < 0.7:
            messages = [*messages[: rng.randrange(2, len(messages) - 1) // 2 * 2],
                        {"role": "user", "content": rng.choice(["go on", "go on 1", "go on 10"])}]
        elif action < 0.85:
            messages = copy.deepcopy(messages)
            edited = messages[rng.randrange(1, len(messages))]
            if isinstance(edited.get("content"), str):
                edited["content"] += rng.choice(["0", '"', "\\", "\U0001f600"])
        elif action < 0.95:
            fields = {**fields, "model": rng.choice(["runaway", "plan"]), "tools": rng.choice([_TOOLS, None])}
        runs[k] = (fields, messages)  # and otherwise: a retry
        style = rng.choice([{}, {"separators": (",", ":")}, {"indent": 1}, {"ensure_ascii": False}])
        bodies.append(json.dumps({**fields, "messages": messages}, **style).encode())
    return bodies


async def _answers(bodies: list[bytes], *, empty_memory: bool) -> list[tuple[int, list, Any]]:
    varying = {"x-request-id", "openai-processing-ms"}
    out = []
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://mock") as client:
        for raw in bodies:
            if empty_memory:
                memo.MEMORY.clear()
            response = await client.post("/v1/chat/completions", content=raw,
                                         headers={"content-type": "application/json"})
            reply = response.json()
            for key in ("id", "created"):
                reply.pop(key, None)
            headers = sorted(h for h in response.headers.items() if h[0] not in varying)
            out.append((response.status_code, headers, reply))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_agent_loops_with_retries_forks_and_edits_are_answered_as_with_an_empty_memory(seed, monkeypatch):
    """Status, headers, body and bill of every request equal those a mock that remembers nothing
    gives; and the memory was used (a test of reuse that never reused would prove nothing)."""
    bodies = _agent_bodies(seed, 60)
    found: list[memo.Entry | None] = []
    find = Memory.find

    def counted_find(memory: Memory, s: str, start: int) -> memo.Entry | None:
        found.append(find(memory, s, start))
        return found[-1]

    monkeypatch.setattr(Memory, "find", counted_find)
    memo.MEMORY.clear()
    try:
        remembered = asyncio.run(_answers(bodies, empty_memory=False))
        reused = sum(entry is not None for entry in found)
        fresh = asyncio.run(_answers(bodies, empty_memory=True))
    finally:
        memo.MEMORY.clear()
    assert reused >= 10
    assert [status for status, _, _ in remembered].count(200) >= len(bodies) // 2
    assert remembered == fresh


def test_a_cleared_memory_admits_new_transcripts_as_a_new_one_does():
    """Once full, the memory admits the `ADMIT_EVERY`-th new transcript; cleared, it counts again
    from nothing, so what a run reads from memory does not depend on runs before the clear."""

    def entry(name: str) -> memo.Entry:
        return memo.Entry(text=name.ljust(memo.MIN_CHARS, "."), messages=[], summary=EMPTY)

    def admitted(memory: Memory) -> list[int]:
        for name in ("held 1", "held 2"):
            memory.remember(entry(name))
        offered = [entry(f"new {k}") for k in range(memo.ADMIT_EVERY)]
        for new in offered:
            memory.remember(new)
        return [k for k, new in enumerate(offered) if memory.find(new.text + "]", 0) is new]

    memory = Memory(max_entries=2)
    first = admitted(memory)
    for k in range(5):
        memory.remember(entry(f"offered before the clear {k}"))
    memory.clear()
    assert admitted(memory) == first == [memo.ADMIT_EVERY - 1]
