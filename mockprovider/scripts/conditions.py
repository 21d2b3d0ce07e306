"""The conditions a scenario file may put on a reply: tests over the conversation so far.

Each is a pure function of the request, like the built-in scenarios, so a file scenario stays
stateless. "The last tool result" is the content of the last tool message; "the user's
message" is the first user message (the task), "the last user message" the newest one. Text
tests are case-sensitive substring tests; the `*_matches` tests take an RE2 regular expression
(`(?i)` for case-insensitive).

Those regexes run on text the client sends, on the event loop. RE2 matches in time linear in
the text, with no backtracking, so no pattern can take exponential time; what it cannot
promise linearly (backreferences, lookaround) it refuses to compile, and the file is refused
at start-up. The remaining factor, the pattern's own size, is bounded too (MAX_PROGRAM_SIZE),
as is the text searched (MAX_MATCH_CHARS): together they bound the time one search can take.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import re2

from mockprovider.scripts.scenarios import Conversation
from o200k import text_of

MAX_MATCH_CHARS = 4_096
"""How much of the text a `*_matches` condition searches: the first this many characters."""
MAX_PROGRAM_SIZE = 1_000
"""The largest compiled pattern accepted, in RE2 instructions: RE2's worst case is about
instructions × characters, so this and MAX_MATCH_CHARS bound a search's time together."""

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported once, in the start-up error
# A condition asks only whether a pattern matches: without captures RE2 answers from its DFA,
# where groups would send every matching search through its NFA, time × pattern size.
_OPTIONS.never_capture = True


class PatternError(ValueError):
    """A pattern a scenario file may not use; the message says why."""


def compile_pattern(pattern: str) -> re2._Regexp:
    """`pattern` compiled by RE2; `PatternError` if RE2 refuses it or it is too large."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise PatternError(
            f"not a pattern RE2 can match in linear time ({reason}); backreferences and lookaround "
            "are not available, and a repeat count may be at most 1000"
        ) from None
    except (TypeError, ValueError, OverflowError) as e:
        raise PatternError(f"not a valid regular expression ({e})") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"compiles to {compiled.programsize} RE2 instructions, more than the limit of "
            f"{MAX_PROGRAM_SIZE}; use smaller repeat counts, and a script (\\p{{Latin}}, \\p{{Greek}}) "
            "or a range rather than a whole Unicode category such as \\pL"
        )
    return compiled


_SURROGATE = re.compile("[\ud800-\udfff]")


def search(pattern: re2._Regexp, text: str) -> bool:
    """Whether `pattern` matches in the first MAX_MATCH_CHARS characters of `text`."""
    # One character past the cut stays as context, so `$`, `\z` and `\b` do not take the cut
    # for the end of the text (or of a word).
    window = text[:MAX_MATCH_CHARS + 1]
    end = min(len(window), MAX_MATCH_CHARS)
    try:
        return pattern.search(window, 0, end) is not None
    except UnicodeEncodeError:
        # RE2 reads UTF-8, which cannot carry a lone surrogate (a JSON escape such as \ud800 in
        # the client's text); no pattern can name one, so it is replaced by U+FFFD, one for one.
        return pattern.search(_SURROGATE.sub("\ufffd", window), 0, end) is not None


def _tool_results(c: Conversation) -> Iterator[str]:
    return (text_of(m.get("content")) for m in c.messages if m.get("role") == "tool")


def first_user(c: Conversation) -> str:
    """The first user message: the task, which names a conversation."""
    return next((text_of(m.get("content")) for m in c.messages if m.get("role") == "user"), "")


def last_user(c: Conversation) -> str:
    """The newest user message: what a multi-turn chat is answering now."""
    return next((text_of(m.get("content")) for m in reversed(c.messages) if m.get("role") == "user"), "")


def system_text(c: Conversation) -> str:
    """Every system (or developer) message, joined by newlines."""
    roles = ("system", "developer")
    return "\n".join(text_of(m.get("content")) for m in c.messages if m.get("role") in roles)


def _tool_name(tool: Any) -> Any:
    function = tool.get("function") if isinstance(tool, Mapping) else None
    return function.get("name") if isinstance(function, Mapping) else None


def _last_tool_message(c: Conversation) -> Mapping[str, Any] | None:
    return next((m for m in reversed(c.messages) if m.get("role") == "tool"), None)


def _name_of_call(c: Conversation, call_id: Any) -> Any:
    """The name of the earlier tool call whose id is `call_id`, or None."""
    for m in reversed(c.messages):
        calls = m.get("tool_calls") if m.get("role") == "assistant" else None
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, Mapping) and call.get("id") == call_id:
                function = call.get("function")
                return function.get("name") if isinstance(function, Mapping) else None
    return None


@dataclass(frozen=True, kw_only=True)
class ToolResultContains:
    text: str

    def holds(self, c: Conversation) -> bool:
        return self.text in c.last_tool_result


@dataclass(frozen=True, kw_only=True)
class AnyToolResultContains:
    text: str

    def holds(self, c: Conversation) -> bool:
        # Message by message: a match must not straddle two tool results.
        return any(self.text in result for result in _tool_results(c))


@dataclass(frozen=True, kw_only=True)
class ToolResultMatches:
    pattern: re2._Regexp

    def holds(self, c: Conversation) -> bool:
        return search(self.pattern, c.last_tool_result)


@dataclass(frozen=True, kw_only=True)
class UserContains:
    text: str

    def holds(self, c: Conversation) -> bool:
        return self.text in first_user(c)


@dataclass(frozen=True, kw_only=True)
class LastUserContains:
    text: str

    def holds(self, c: Conversation) -> bool:
        return self.text in last_user(c)


@dataclass(frozen=True, kw_only=True)
class LastUserMatches:
    pattern: re2._Regexp

    def holds(self, c: Conversation) -> bool:
        return search(self.pattern, last_user(c))


@dataclass(frozen=True, kw_only=True)
class SystemContains:
    text: str

    def holds(self, c: Conversation) -> bool:
        return self.text in system_text(c)


@dataclass(frozen=True, kw_only=True)
class HasTool:
    name: str

    def holds(self, c: Conversation) -> bool:
        return any(_tool_name(tool) == self.name for tool in c.tools)


@dataclass(frozen=True, kw_only=True)
class ToolResultOf:
    name: str

    def holds(self, c: Conversation) -> bool:
        last = _last_tool_message(c)
        return last is not None and _name_of_call(c, last.get("tool_call_id")) == self.name


@dataclass(frozen=True, kw_only=True)
class AnswersCall:
    """The request's last message is a tool result answering the call with this id."""

    call_id: str

    def holds(self, c: Conversation) -> bool:
        last = c.messages[-1] if c.messages else {}
        return last.get("role") == "tool" and last.get("tool_call_id") == self.call_id


@dataclass(frozen=True, kw_only=True)
class AfterToolResult:
    """Whether a tool result comes after the last user message: the model is answering tools."""

    expected: bool

    def holds(self, c: Conversation) -> bool:
        for m in reversed(c.messages):
            role = m.get("role")
            if role == "tool":
                return self.expected
            if role == "user":
                break
        return not self.expected


@dataclass(frozen=True, kw_only=True)
class TurnAtLeast:
    turn: int

    def holds(self, c: Conversation) -> bool:
        return c.turn >= self.turn


@dataclass(frozen=True, kw_only=True)
class Not:
    condition: Condition

    def holds(self, c: Conversation) -> bool:
        return not self.condition.holds(c)


@dataclass(frozen=True, kw_only=True)
class All:
    conditions: tuple[Condition, ...]

    def holds(self, c: Conversation) -> bool:
        return all(condition.holds(c) for condition in self.conditions)


@dataclass(frozen=True, kw_only=True)
class AnyOf:
    conditions: tuple[Condition, ...]

    def holds(self, c: Conversation) -> bool:
        return any(condition.holds(c) for condition in self.conditions)


Condition = (
    ToolResultContains | AnyToolResultContains | ToolResultMatches | UserContains | LastUserContains
    | LastUserMatches | SystemContains | HasTool | ToolResultOf | AnswersCall | AfterToolResult | TurnAtLeast
    | Not | All | AnyOf
)
