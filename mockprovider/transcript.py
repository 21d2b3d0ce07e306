"""A request's messages read once: checked, their turn and tool text derived, then counted.

Reading starts from what `memo` already knows (`Known`: a remembered transcript the request's
messages begin with, and its `Summary`) and reads only the messages after it:

    summary(messages) = extend(summary(messages[:L]), messages[L:])

It is split in two so that the cheap part answers bad input at once and the expensive part
can wait for the provider's latency and be skipped for a client that has gone: `read`
(checks, turn, tool text; on the event loop) and `prompt_tokens` (the o200k count, by the
formula's additivity only of the new messages; large texts on a worker thread so that they
never block other requests).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import o200k
from mockprovider.errors import invalid, missing
from mockprovider.scenarios import Conversation

ROLES = ("system", "developer", "user", "assistant", "tool", "function")

OFFLOAD_CHARS = 32_768
"""New text above this many characters is counted on a worker thread (~1.5 ms of encoding)."""


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


@dataclass(frozen=True, kw_only=True)
class Transcript:
    """A checked request transcript whose new part is not counted yet."""

    messages: list[dict[str, Any]]
    start: Summary
    """The summary of the first `known` messages (EMPTY when none)."""
    known: int
    remember: Callable[[Summary], None] | None
    turn: int
    tool_text: str | None
    calls: frozenset[str]
    new_chars: int
    """Characters of text in the messages past `known` (what counting will encode)."""

    def conversation(self) -> Conversation:
        """What a scenario sees."""
        return Conversation(turn=self.turn, tool_text=self.tool_text or "", messages=self.messages)


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


def _check_tool_calls(calls: Any, i: int) -> tuple[list[str], int]:
    """The call ids and the characters of their names and arguments."""
    if not isinstance(calls, list):
        param = f"messages[{i}].tool_calls"
        raise invalid(f"Invalid type for '{param}': expected an array.", param=param)
    ids, chars = [], 0
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and isinstance(fn, dict)
            and isinstance(fn.get("name"), str)
            and isinstance(fn.get("arguments"), str)
        ):
            p = f"messages[{i}].tool_calls[{j}]"
            raise invalid(
                f"Invalid '{p}': a tool call needs a string 'id' and a 'function' with string "
                "'name' and 'arguments'.",
                param=p,
            )
        ids.append(call["id"])
        chars += len(call["id"]) + len(fn["name"]) + len(fn["arguments"])
    return ids, chars


_ROLES = frozenset(ROLES)


def check_message(m: Any, i: int, calls: set[str]) -> int:
    """Check `messages[i]`, adding the call ids it makes to `calls`; its text length.

    Parameter names are built only for an error: every message of every request passes here,
    so the common shapes (a string content, no name) are tested first.
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
    content = get("content")
    chars = len(content) if type(content) is str else _content_chars(content, i)
    if "name" in m:
        name = m["name"]
        if not isinstance(name, str):
            p = f"messages[{i}].name"
            raise invalid(f"Invalid type for '{p}': expected a string.", param=p)
        chars += len(name)
    # Checked on every role: the token count reads tool_calls wherever they appear.
    if (tool_calls := get("tool_calls")) is not None:
        ids, call_chars = _check_tool_calls(tool_calls, i)
        calls.update(ids)
        chars += call_chars
    if role == "tool":
        chars += _check_answer(m, i, calls)
    return chars


def _check_answer(m: dict[str, Any], i: int, calls: set[str]) -> int:
    """A tool message's `tool_call_id` must answer an earlier call; its length."""
    call_id = m.get("tool_call_id")
    if not isinstance(call_id, str):
        raise missing(f"messages[{i}].tool_call_id")
    if call_id not in calls:
        raise invalid(
            f"Invalid parameter: 'messages[{i}]' with role 'tool' answers tool_call_id {call_id!r}, "
            "which no preceding assistant message's 'tool_calls' contains.",
            param=f"messages[{i}].tool_call_id",
        )
    return len(call_id)


# --- reading and counting ------------------------------------------------------------------


def read(messages: Any, known: Known | None = None) -> Transcript:
    """Check `messages` and derive turn and tool text, reading only what `known` does not cover."""
    if messages is None:
        raise missing("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("Invalid 'messages': expected a non-empty array of messages.", param="messages")
    count, start = (known.count, known.summary) if known and known.summary else (0, EMPTY)
    turn, tool_text, calls, new_chars = start.turn, start.tool_text, start.calls, 0
    if count < len(messages):
        open_calls = set(calls)
        for i in range(count, len(messages)):
            m = messages[i]
            new_chars += check_message(m, i, open_calls)
            role = m["role"]
            if role == "assistant":
                turn += 1
            elif role == "tool":
                text = o200k.text_of(m.get("content"))
                tool_text = text if tool_text is None else f"{tool_text}\n{text}"
        calls = frozenset(open_calls)
    return Transcript(
        messages=messages, start=start, known=count, remember=known.remember if known else None,
        turn=turn, tool_text=tool_text, calls=calls, new_chars=new_chars,
    )


def _tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> tuple[int, int]:
    return sum(map(o200k.message_tokens, messages)), o200k.tools_tokens(tools)


_COUNTERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="o200k")
"""Large counts run here (the encoder releases the GIL while it encodes); few threads, so a burst of huge
prompts queues instead of crowding the event loop off the CPU."""


async def prompt_tokens(t: Transcript, tools: Sequence[Mapping[str, Any]] | None) -> int:
    """`o200k.prompt_tokens(t.messages, tools)`, counting only the new messages; remembers `t`.

    Both additivity properties of the formula make this exact: a transcript's count is its
    known prefix's count plus its new messages' own, and tools add their own count.
    """
    new = t.messages[t.known :] if t.known else t.messages
    size = t.new_chars + (len(json.dumps(tools)) if tools else 0)
    if size > OFFLOAD_CHARS:
        loop = asyncio.get_running_loop()
        new_tokens, tools_tokens = await loop.run_in_executor(_COUNTERS, _tokens, new, tools)
    else:
        new_tokens, tools_tokens = _tokens(new, tools)
    total = t.start.tokens + new_tokens
    if new and t.remember:
        t.remember(Summary(tokens=total, turn=t.turn, tool_text=t.tool_text, calls=t.calls))
    return total + tools_tokens
