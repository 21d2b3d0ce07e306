"""`transcript.read` reads the common message shapes in one loop of its own: it must answer
exactly what the general path (`read_message`, every field checked) and the token formula answer,
for those shapes and for every near miss of them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import o200k
from mockprovider.errors import APIError
from mockprovider.reading import transcript

texts = st.text(max_size=12) | st.just("") | st.text(min_size=4100, max_size=4100, alphabet="ab ")
values = st.none() | st.integers(-2, 2) | st.booleans() | st.just(["user"]) | st.just({"x": 1})
roles = st.sampled_from([*transcript.ROLES, "robot", "Tool"]) | values
ids = st.sampled_from(["c1", "c2", "c3"])
function = st.fixed_dictionaries({"name": texts, "arguments": texts})
call = st.fixed_dictionaries({"id": ids, "type": st.just("function"), "function": function})
calls = st.lists(call | values, max_size=2) | st.lists(call, min_size=1, max_size=2)
contents = texts | st.none() | st.just([{"type": "text", "text": "part"}]) | values


@st.composite
def messages(draw) -> dict[str, Any]:
    """A message of one of the three common shapes (or another valid one), and two times in
    five a near miss of it: a field or two replaced by a value of another type, dropped, or added."""
    shape = draw(st.sampled_from(["plain", "tool", "calls", "other"]))
    if shape == "plain":
        role = draw(st.sampled_from(["system", "user", "assistant", "developer"]))
        m = {"role": role, "content": draw(texts)}
    elif shape == "tool":
        m = {"role": "tool", "tool_call_id": draw(ids), "content": draw(texts)}
    elif shape == "calls":
        m = {"role": "assistant", "content": None, "tool_calls": draw(calls)}
    else:
        role = draw(st.sampled_from(transcript.ROLES) | roles)
        m = {"role": role, "content": draw(contents), "name": draw(texts)}
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        change = draw(st.sampled_from(["replace", "drop", "add"]))
        keys = sorted(m) if change != "add" else ["name", "tool_call_id", "x", "content"]
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        if change == "drop":
            del m[key]
        else:
            m[key] = draw(values | texts | roles)
    return m


def _general(ms: list[Any]) -> tuple[int, int, str | None, frozenset[str]]:
    """The oracle: every message through `read_message`, counted with no inline limit."""
    open_calls: set[str] = set()
    pending: dict[str, int] = {}
    tokens, turn, tool_text = transcript.EMPTY.tokens, 0, None
    for i, m in enumerate(ms):
        _, n = transcript.read_message(m, i, open_calls, 1 << 60, pending)
        tokens += n
        if m["role"] == "assistant":
            turn += 1
        elif m["role"] == "tool":
            text = o200k.text_of(m.get("content"))
            tool_text = text if tool_text is None else f"{tool_text}\n{text}"
    if pending:
        raise transcript.unanswered(pending)
    return tokens, turn, tool_text, frozenset(open_calls)


def _outcome(read: Any, ms: list[Any]) -> Any:
    try:
        return read(ms)
    except APIError as e:
        return (e.status, e.param, e.code, e.message)


def _fast(ms: list[Any]) -> Any:
    t = transcript.read(ms)
    assert t.counted == len(ms)  # all of it short enough to count inline
    return t.tokens, t.turn, t.tool_text, t.calls


@st.composite
def transcripts(draw) -> list[dict[str, Any]]:
    """Messages in which a tool answer usually answers a call made before it."""
    ms = draw(st.lists(messages(), min_size=1, max_size=6))
    made: list[str] = []
    for m in ms:
        if m.get("role") == "tool" and type(m.get("tool_call_id")) is str and made and draw(st.booleans()):
            m["tool_call_id"] = draw(st.sampled_from(made))
        if isinstance(m.get("tool_calls"), list):
            made += [c["id"] for c in m["tool_calls"] if isinstance(c, dict) and isinstance(c.get("id"), str)]
    return ms


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(transcripts())
def test_read_answers_what_the_general_path_and_the_formula_answer(ms):
    outcome = _outcome(_fast, ms)
    assert outcome == _outcome(_general, ms)
    if isinstance(outcome[3], frozenset):  # read, not refused: the count is the formula's
        assert outcome[0] == o200k.prompt_tokens(ms)
    read = isinstance(outcome[3], frozenset)
    event("read" if read else "refused: " + re.sub(r"\[\d+\]", "[i]", str(outcome[1])))


CALL = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
ASKS = {"role": "assistant", "content": None, "tool_calls": [CALL]}
NEAR_MISSES = [
    # each next to a shape `read` reads on its own: one guard of that shape fails
    {"role": "tool", "content": "x"},
    {"role": ["user"], "content": "x"},
    {"role": "robot", "content": "x"},
    {"role": "user", "name": "x"},
    {"role": "user", "content": 5},
    {"role": "user", "content": "x" * 5000},
    {"role": "tool", "tool_call_id": "c9", "content": "x"},
    {"role": "tool", "tool_call_id": 5, "content": "x"},
    {"role": "tool", "name": "x", "content": "x"},
    {"role": "tool", "tool_call_id": "c1", "name": 5},
    {"role": "tool", "tool_call_id": "c1", "content": None},
    {"role": "assistant", "tool_calls": [CALL], "name": 5},
    {"role": "assistant", "tool_calls": [CALL], "name": "bot"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": 1}]},
    {"role": "assistant", "content": None, "tool_calls": "x"},
    {"role": "assistant", "content": 5, "tool_calls": []},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "user", "content": None, "tool_calls": [CALL]},
]


@pytest.mark.parametrize("near_miss", NEAR_MISSES, ids=lambda m: repr(m)[:60])
def test_read_answers_a_near_miss_of_a_common_shape_as_the_general_path_does(near_miss):
    ms = [{"role": "user", "content": "hi"}, ASKS, near_miss]
    outcome = _outcome(_fast, ms)
    assert outcome == _outcome(_general, ms)


USER = {"role": "user", "content": "go"}


def _answer(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


@pytest.mark.parametrize(("ms", "refusal", "tool_text"), [
    ([USER, ASKS, USER, _answer("c1")], "must be followed by tool messages", "ok"),  # answered late
    ([USER, ASKS, USER], "must be followed by tool messages", None),  # never answered
    ([USER, ASKS, _answer("c1"), _answer("c1")], "is already answered", "ok\nok"),  # answered twice
], ids=["late", "unanswered", "twice"])
def test_paired_reads_results_a_format_paired_by_its_own_rules_that_chat_refuses(ms, refusal, tool_text):
    with pytest.raises(APIError, match=refusal):
        transcript.read(ms)
    t = transcript.read(ms, paired=True)
    assert (t.tokens, t.turn, t.tool_text) == (o200k.prompt_tokens(ms), 1, tool_text)


def test_paired_still_refuses_a_result_answering_no_call_made_before_it():
    for ms in ([USER, _answer("c1"), ASKS, _answer("c1")], [USER, ASKS, _answer("c9")]):
        with pytest.raises(APIError, match="must be a response to a preceeding message"):
            transcript.read(ms, paired=True)


def _counted(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    coro = transcript.prompt_tokens(transcript.read(messages), tools)
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("a short prompt was not counted inline")


def _tool(value: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "x": value}}}


@pytest.mark.parametrize("values", [
    (True, 1), (1, 1.0), (0.0, -0.0), ("1", 1), (None, "null"), (float("nan"), None),
    (float("inf"), None), (float("-inf"), float("nan")), (2**64, float(2**64)), ([1], (1,)),
])
def test_a_kept_tools_count_is_never_reused_for_tools_that_differ_only_in_type(values):
    # Each pair is equal, or prints alike, in some sense; their JSON differs, and so does the bill.
    messages = [{"role": "user", "content": "hi"}]
    for value in (*values, *values):  # both orders, the second time from the kept counts
        tools = [_tool(value)]
        assert _counted(messages, tools) == o200k.prompt_tokens(messages, tools)


def test_the_kept_tools_counts_are_bounded(monkeypatch):
    monkeypatch.setattr(transcript, "TOOLS_KEPT", 4)
    messages = [{"role": "user", "content": "hi"}]
    for k in range(10):
        tools = [_tool(k)]
        assert _counted(messages, tools) == o200k.prompt_tokens(messages, tools)
    assert len(transcript._TOOLS_COUNTED) <= 4


def test_tools_longer_than_the_key_limit_are_counted_each_time_not_kept(monkeypatch):
    monkeypatch.setattr(transcript, "TOOLS_KEY_CHARS", 16)
    transcript.forget_tools_counts()
    messages = [{"role": "user", "content": "hi"}]
    tools = [_tool("a value whose repr passes the limit")]
    for _ in range(2):
        assert _counted(messages, tools) == o200k.prompt_tokens(messages, tools)
    assert transcript.tools_key(tools) not in transcript._TOOLS_COUNTED
