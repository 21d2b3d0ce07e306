"""The conditions a scenario file may put on a reply: tests over the conversation so far.

Each is a pure function of the request, like the built-in scenarios, so a file scenario stays
stateless. "The last tool result" is the content of the last tool message; "the user's
message" is the first user message (the task). Text tests are case-sensitive substring tests;
`tool_result_matches` takes a Python regular expression (`(?i)` for case-insensitive).

That regex runs on text the client sends, and Python's `re` backtracks without a time limit:
`(a+)+$` takes minutes on thirty characters. So a file's pattern is refused at start-up when it
can backtrack exponentially (a repeat or an alternation inside a repeat) or worse than
quadratically (two unbounded repeats), and the search reads only the first MAX_MATCH_CHARS
characters of the tool result, which bounds the quadratic case too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from re import _constants as sre  # the parsed form of a pattern: no public API exposes it
from re import _parser

from mockprovider.scenarios import Conversation
from o200k import text_of

MAX_MATCH_CHARS = 4_096
"""How much of the tool result `tool_result_matches` searches: with the pattern rules below, at
worst about a second of backtracking on a loaded laptop core."""
_LONG = 64
"""A repeat whose maximum is above this counts as unbounded."""
_SMALL = 16
"""How far the bounded repeats' ranges may multiply beside an unbounded repeat."""
_BUDGET = 4_096
"""How far they may multiply in a pattern without one."""


def _tool_results(c: Conversation) -> Iterator[str]:
    return (text_of(m.get("content")) for m in c.messages if m.get("role") == "tool")


def first_user(c: Conversation) -> str:
    """The first user message: the task, which names a conversation."""
    return next((text_of(m.get("content")) for m in c.messages if m.get("role") == "user"), "")


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
    pattern: re.Pattern[str]

    def holds(self, c: Conversation) -> bool:
        return self.pattern.search(c.last_tool_result, 0, MAX_MATCH_CHARS) is not None


def backtracking_risk(pattern: str) -> str | None:
    """Why searching with `pattern` could take more than ~quadratic time in the text, or None."""
    return _risk(_parser.parse(pattern))


def _risk(items: _parser.SubPattern | list) -> str | None:
    """Why searching with `items` (a parsed pattern) could take more than ~quadratic time, or None.

    A search tries each start; at each, every repeat may try each of its lengths, so the work
    is the product of the repeats' ranges (an unbounded one: the text's length), and what sits
    inside a repeat of at most m rounds counts m times over. So: no repeat or alternation
    inside an unbounded repeat (exponential), at most one unbounded repeat, and the bounded
    tries multiply to at most _BUDGET (or _SMALL beside an unbounded repeat). An atomic group
    or a possessive repeat never backtracks into what it matched, so it adds rather than
    multiplies: its inside is checked as a pattern of its own.
    """
    unbounded, product = 0, 1

    def tries(factor: int, inside: int) -> None:
        nonlocal product
        product = min(product * factor**inside, _BUDGET + 1)

    def walk(items: _parser.SubPattern | list, inside: int) -> str | None:
        """`inside`: the largest maximum of the repeats around `items` (1 at the top)."""
        nonlocal unbounded
        for op, av in items:
            found = None
            if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
                high, body = av[1], av[2]
                if high > 1 and inside > _LONG:
                    return "a repeat inside a repeat can backtrack catastrophically"
                if high > _LONG:
                    unbounded += 1
                elif high > 1:
                    tries(high, inside)
                found = walk(body, max(inside, high))
            elif op is sre.BRANCH:
                if inside > _LONG:
                    return "an alternation inside a repeat can backtrack catastrophically"
                if inside > 1:
                    tries(len(av[1]), inside)
                found = next(filter(None, (walk(branch, inside) for branch in av[1])), None)
            elif op is sre.SUBPATTERN:
                found = walk(av[3], inside)
            elif op is sre.ATOMIC_GROUP:
                found = _risk(av)
            elif op is sre.POSSESSIVE_REPEAT:
                found = _risk(av[2])
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                found = walk(av[1], inside)
            elif op is sre.GROUPREF_EXISTS:
                found = walk(av[1], inside) or (walk(av[2], inside) if av[2] is not None else None)
            if found:
                return found
        return None

    found = walk(items, 1)
    if found is None and unbounded > 1:
        found = "a pattern may hold at most one unbounded repeat (*, +, {n,}), as two search in cubic time"
    if found is None and product > (_SMALL if unbounded else _BUDGET):
        found = "its bounded repeats multiply to too many tries per position to search in bounded time"
    return found


@dataclass(frozen=True, kw_only=True)
class UserContains:
    text: str

    def holds(self, c: Conversation) -> bool:
        return self.text in first_user(c)


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


Condition = ToolResultContains | AnyToolResultContains | ToolResultMatches | UserContains | All | AnyOf
