"""A request's messages read once: checked, counted, their turn and tool text derived.

The one reader of every wire format: the chat route reads its messages here, and the other
formats (`apis/shared.scripted_turn`) the chat-shaped messages they translate their requests into,
so a conversation is the same turn, tool text and count whichever format carries it. A format
whose API pairs tool results with calls more loosely than chat's has checked that pairing in its
own words already and reads with `paired` (see `read`).

On the chat route, reading starts from what `memo` already knows (`Known`: a remembered
transcript the request's messages begin with, and its `Summary`) and reads only the messages
after it (other formats read from the start):

    summary(messages) = extend(summary(messages[:L]), messages[L:])

Each new message is checked and counted in one pass (`read`), its fields read once, while the
new text stays within `INLINE_CHARS`: that is what nearly every agent turn sends, and counting it
costs microseconds (its texts are mostly cached). Text past that is counted later, by
`prompt_tokens`: after the provider's latency, so it is skipped for a client that has gone, and
on a worker thread, so that it never blocks other requests. Both are exact by the formula's
additivity.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import orjson

import o200k
from mockprovider.errors import invalid, missing
from mockprovider.offload import INLINE_CHARS, off_the_loop_if_large
from mockprovider.reading.pairing import duplicate, orphan, unanswered
from mockprovider.scripts.scenarios import Conversation

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass(frozen=True, kw_only=True)
class Summary:
    """What a transcript (a list of messages) amounts to."""

    tokens: int
    """`o200k.prompt_tokens` of its messages (no tools)."""
    turn: int
    """Assistant messages in it."""
    tool_text: str | None
    """Its tool messages' texts joined by newlines; None while it has none."""
    calls: frozenset[str]
    """Every tool-call id its assistant messages made."""


EMPTY = Summary(tokens=o200k.prompt_tokens([]), turn=0, tool_text=None, calls=frozenset())


@dataclass(frozen=True, kw_only=True)
class Known:
    """What the parser found remembered about a request's messages."""

    count: int
    """How many leading messages a remembered transcript covers (0: none)."""
    summary: Summary | None
    """That transcript's summary."""
    remember: Callable[[Summary], None]
    """Remember these messages with their summary, once counted."""
    span: tuple[int, int] | None = None
    """Where the remembered messages' text lies in the body's bytes, when the body is ASCII (its
    characters are then its bytes); None otherwise."""


class Transcript(NamedTuple):
    """A checked request transcript, counted up to `counted` (a NamedTuple for speed:
    results/bench.md, speed tricks: "Transcript a NamedTuple")."""

    messages: list[dict[str, Any]]
    known: int
    """How many leading messages a remembered transcript covered (read from memory, not here)."""
    remember: Callable[[Summary], None] | None
    turn: int
    tool_text: str | None
    calls: frozenset[str]
    counted: int
    """`messages[:counted]` are counted in `tokens`; the rest wait for `prompt_tokens`."""
    tokens: int
    """Prompt tokens of `messages[:counted]` (no tools)."""
    rest_chars: int
    """Characters of text in `messages[counted:]`: what counting them will encode."""

    def conversation(self, tools: Sequence[Mapping[str, Any]] | None = None) -> Conversation:
        """What a scenario sees: this transcript and the tools the request offers."""
        return Conversation(turn=self.turn, tool_text=self.tool_text or "", messages=self.messages,
                            tools=tools or ())


# --- the checks (one message at a time; a tool message may answer only an earlier call) ------


def _content_chars(value: Any, i: int) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in value
    ):
        return sum(len(p.get("text", "")) for p in value)
    param = f"messages[{i}].content"
    raise invalid(f"Invalid type for '{param}': expected a string, an array of parts, or null.", param=param)


def _check_tool_calls(calls: Any, i: int, ids: set[str]) -> tuple[o200k.CallFields, int]:
    """The calls' (id, name, arguments) and the characters of their texts; their ids go to `ids`."""
    if not isinstance(calls, list):
        param = f"messages[{i}].tool_calls"
        raise invalid(f"Invalid type for '{param}': expected an array.", param=param)
    fields, chars = [], 0
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(fn, dict)
            and isinstance(call_id := call.get("id"), str)
            and isinstance(name := fn.get("name"), str)
            and isinstance(arguments := fn.get("arguments"), str)
        ):
            p = f"messages[{i}].tool_calls[{j}]"
            raise invalid(
                f"Invalid '{p}': a tool call needs a string 'id' and a 'function' with string "
                "'name' and 'arguments'.",
                param=p,
            )
        fields.append((call_id, name, arguments))
        ids.add(call_id)
        chars += len(call_id) + len(name) + len(arguments)
    return tuple(fields), chars


_ROLES = frozenset(ROLES)
_PLAIN_ROLES = _ROLES - {"tool"}
"""Roles a {role, content} message may have: a tool message must answer a call."""


def read_message(
    m: Any, i: int, calls: set[str], room: int, pending: dict[str, int], paired: bool = False
) -> tuple[int, int | None]:
    """Check `messages[i]`, adding the call ids it makes to `calls` (and, for an assistant, to
    `pending` until tool messages answer them): its text length, and its tokens if that text
    fits in `room` characters (None: counted later). `paired`: as `read`'s.

    Every message of every request passes here, so each field is read once, the common shapes
    are tested first, and parameter names are built only for an error.
    """
    if not isinstance(m, dict):
        raise invalid(f"Invalid type for 'messages[{i}]': expected an object.", param=f"messages[{i}]")
    get = m.get
    role = get("role")
    if not (isinstance(role, str) and role in _ROLES):  # a str first: an unhashable role is a 400
        raise invalid(
            f"Invalid value for 'messages[{i}].role': {role!r}. Supported values are: "
            + ", ".join(repr(r) for r in ROLES) + ".",
            param=f"messages[{i}].role",
            code="invalid_value",
        )
    if pending and role != "tool" and not paired:
        raise unanswered(pending)
    content = get("content")
    chars = len(content) if type(content) is str else 0 if content is None else _content_chars(content, i)
    name = get("name")
    if name is not None or "name" in m:
        if not isinstance(name, str):
            p = f"messages[{i}].name"
            raise invalid(f"Invalid type for '{p}': expected a string.", param=p)
        chars += len(name)
    # Checked on every role: the token count reads tool_calls wherever they appear.
    call_fields: o200k.CallFields = ()
    if (tool_calls := get("tool_calls")) is not None:
        call_fields, call_chars = _check_tool_calls(tool_calls, i, calls)
        chars += call_chars
        if role == "assistant":
            pending.update((call[0], i) for call in call_fields)
    call_id = get("tool_call_id")
    if role == "tool":
        chars += _check_answer(call_id, i, calls, pending, paired)
    elif call_id is not None:  # not checked on other roles, but counted: its size decides where
        chars += len(call_id) if type(call_id) is str else len(json.dumps(call_id))
    if chars > room:
        return chars, None
    return chars, o200k.fields_tokens(role, content, name, call_id, call_fields)


SHORT_CHARS = 1024
"""Messages whose texts total at most this many characters have their counts cached whole."""


@lru_cache(maxsize=4096)  # at most 4,096 x 1,024 characters (~16 MB even at 4 bytes a character)
def _short_tokens(role: str, content: str | None, call_id: str | None, calls: o200k.CallFields) -> int:
    # A message comes back in every later request of its run, and a system prompt in every run:
    # one lookup instead of counting each of its fields again.
    return o200k.fields_tokens(role, content, None, call_id, calls)


def _check_answer(call_id: Any, i: int, calls: set[str], pending: dict[str, int], paired: bool) -> int:
    """A tool message's `tool_call_id` must answer a call of the assistant message its run of
    tool messages follows, once (`paired`: any call made before it); its length."""
    if not isinstance(call_id, str):
        raise missing(f"messages[{i}].tool_call_id")
    if pending.pop(call_id, None) is None and not (paired and call_id in calls):
        raise (duplicate(call_id, i) if call_id in calls else orphan(i))
    return len(call_id)


# --- reading and counting ------------------------------------------------------------------


def read(messages: Any, known: Known | None = None, *, paired: bool = False) -> Transcript:
    """Check and count `messages`, and derive turn and tool text, reading only what `known`
    does not cover; new text past `INLINE_CHARS` is left for `prompt_tokens` to count.

    `paired`: the messages are another wire format's, translated, and that format has already
    matched each result to the call it answers by its own rules (the Responses API takes an
    output anywhere after its call; Gemini's and Ollama's results may name no call and leave
    calls unanswered) and refused, in its own words, what they refuse. A tool message then
    needs only to answer a call made before it, not the assistant message it follows.
    """
    if messages is None:
        raise missing("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("Invalid 'messages': expected a non-empty array of messages.", param="messages")
    count, start = (known.count, known.summary) if known and known.summary else (0, EMPTY)
    remember = known.remember if known else None
    if count == len(messages):  # a resent transcript: all of it is known
        return Transcript(
            messages=messages, known=count, remember=remember, turn=start.turn, tool_text=start.tool_text,
            calls=start.calls, counted=count, tokens=start.tokens, rest_chars=0,
        )
    return _read_new(messages, count, start, remember, paired)


def conversation(
    messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None, *, paired: bool = False
) -> Conversation:
    """What a scenario sees of `messages` (checked as `read` checks them) and `tools`."""
    return read(messages, paired=paired).conversation(tools)


def _read_new(
    messages: list[Any], count: int, start: Summary, remember: Callable[[Summary], None] | None, paired: bool
) -> Transcript:
    """`read` of `messages[count:]`, after `start`.

    One loop with the three shapes an agent loop sends written out (a plain message, a tool
    answer, an assistant's tool calls), so that a short request runs few functions (results/bench.md,
    speed tricks: "common message shapes written out"). Anything else, including
    every malformed message, goes through `read_message`.
    """
    turn, tool_text, calls = start.turn, start.tool_text, set(start.calls)
    tokens, counted, room, rest = start.tokens, count, INLINE_CHARS, 0
    # Call id -> the assistant message that made it, until a tool message answers it. A known
    # prefix leaves none: it was a whole request once, and a request with one is refused.
    pending: dict[str, int] = {}
    for i in range(count, len(messages)):
        m = messages[i]
        size = len(m) if type(m) is dict else 0
        role, content = (m.get("role"), m.get("content")) if size else (None, None)
        call_id, fields, n = None, (), None
        if size == 2 and type(content) is str and type(role) is str and role in _PLAIN_ROLES:
            if pending and not paired:
                raise unanswered(pending)
            chars = len(content)
        elif size == 3 and role == "tool" and type(content) is str and type(m.get("tool_call_id")) is str:
            call_id = m["tool_call_id"]
            chars = len(content) + _check_answer(call_id, i, calls, pending, paired)
        elif size == 3 and role == "assistant" and "content" in m and content is None \
                and type(m.get("tool_calls")) is list:
            if pending and not paired:
                raise unanswered(pending)
            fields, chars = _check_tool_calls(m["tool_calls"], i, calls)
            pending.update((call[0], i) for call in fields)
        else:
            chars, n = read_message(m, i, calls, room, pending, paired)
        if chars <= room:
            if n is None:
                short = chars <= SHORT_CHARS
                n = (_short_tokens(role, content, call_id, fields) if short
                     else o200k.fields_tokens(role, content, None, call_id, fields))
            tokens, counted = tokens + n, i + 1
        else:  # once a message does not fit, none after it does: `counted` is a prefix
            rest += chars
        room -= chars
        if role == "assistant":
            turn += 1
        elif role == "tool":
            text = content if type(content) is str else o200k.text_of(content)
            tool_text = text if tool_text is None else f"{tool_text}\n{text}"
    if pending and not paired:
        raise unanswered(pending)
    return Transcript(
        messages=messages, known=count, remember=remember, turn=turn, tool_text=tool_text,
        calls=frozenset(calls), counted=counted, tokens=tokens, rest_chars=rest,
    )


def _tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> tuple[int, int]:
    return sum(map(o200k.message_tokens, messages)), o200k.tools_tokens(tools)


TOOLS_KEY_CHARS = 1 << 16
"""Tool lists whose key is at most this long have their count kept (TOOLS_KEPT of them)."""
TOOLS_KEPT = 128
_TOOLS_COUNTED: dict[str | bytes, int] = {}
_TOOLS_LOCK = threading.Lock()  # servers in threads of one process share the counts
_NULLS = (b":null", b"[null", b",null")


def tools_key(tools: Sequence[Mapping[str, Any]]) -> str | bytes:
    """What the tools' count is kept under: their JSON as orjson writes it, or their repr.

    Equal keys are tools that count alike: orjson's text tells apart every JSON value a client
    can send (`true` from `1`, `1.0` from `1`, key order kept) except NaN and the infinities,
    which it writes as `null`; a text with a null value takes the repr instead, as does anything
    orjson refuses (integers past 64 bits). Several times cheaper than the repr alone
    (results/bench.md, speed tricks: "tools keyed by orjson's text").
    """
    try:
        key = orjson.dumps(tools)
    except TypeError:  # orjson.JSONEncodeError
        return repr(tools)
    # find, not `in`: `bytes in bytes` first tries the needle as an integer and formats the
    # TypeError that fails (results/bench.md, speed tricks: "bytes searched with find").
    if key.find(_NULLS[0]) >= 0 or key.find(_NULLS[1]) >= 0 or key.find(_NULLS[2]) >= 0:
        return repr(tools)
    return key


def _keep_tools_count(key: str | bytes, n: int) -> None:
    if len(key) > TOOLS_KEY_CHARS:
        return
    with _TOOLS_LOCK:
        _TOOLS_COUNTED[key] = n
        while len(_TOOLS_COUNTED) > TOOLS_KEPT:
            del _TOOLS_COUNTED[next(iter(_TOOLS_COUNTED))]


def forget_tools_counts() -> None:
    """Empty the tools' counts (benchmarks time the uncounted path with this)."""
    with _TOOLS_LOCK:
        _TOOLS_COUNTED.clear()


async def counted(t: Transcript, tools: Sequence[Mapping[str, Any]] | None) -> tuple[Conversation, int]:
    """What a scenario sees of `t` and `tools`, and `o200k.prompt_tokens(t.messages, tools)`:
    `t.tokens` plus the messages `read` left uncounted and the tools (a worker thread counts them
    when they are large); remembers `t`. A request's second and last visit to this folder, after
    the provider's latency.

    Both additivity properties of the formula make this exact: a transcript's count is its
    counted prefix's count plus its other messages' own, and tools add their own count.

    An agent loop offers the same tools with every request, so their count is kept under
    `tools_key`, equal only for tools that count alike, so a kept count is exact (results/bench.md,
    speed tricks: "tools' count kept").
    """
    key = tools_key(tools) if tools else b""
    tools_tokens = _TOOLS_COUNTED.get(key) if tools else 0  # None: to count
    rest = t.messages[t.counted :]
    if rest or tools_tokens is None:
        uncounted = tools if tools_tokens is None else None
        size = t.rest_chars + (len(key) if uncounted else 0)
        rest_tokens, counted_now = await off_the_loop_if_large(size, _tokens, rest, uncounted)
        if tools_tokens is None:
            tools_tokens = counted_now
            _keep_tools_count(key, counted_now)
        total = t.tokens + rest_tokens
    else:
        total = t.tokens
    if t.remember and t.known < len(t.messages):
        t.remember(Summary(tokens=total, turn=t.turn, tool_text=t.tool_text, calls=t.calls))
    return t.conversation(tools), total + tools_tokens


def counted_already(
    t: Transcript, tools: Sequence[Mapping[str, Any]] | None
) -> tuple[Conversation, int] | None:
    """`counted` without a coroutine, when nothing is left to count (None: await `counted`)."""
    tools_tokens = _TOOLS_COUNTED.get(tools_key(tools)) if tools else 0
    if t.counted < len(t.messages) or tools_tokens is None:
        return None
    if t.remember and t.known < len(t.messages):
        t.remember(Summary(tokens=t.tokens, turn=t.turn, tool_text=t.tool_text, calls=t.calls))
    return t.conversation(tools), t.tokens + tools_tokens


async def prompt_tokens(t: Transcript, tools: Sequence[Mapping[str, Any]] | None) -> int:
    """`counted`'s count alone, for a request that asks only for it (a format's count_tokens)."""
    return (await counted(t, tools))[1]
