"""The conditions a scenario file may put on a reply: tests over the conversation so far.

Each is a pure function of the request, like the built-in scenarios, so a file scenario stays
stateless. "The last tool result" is the content of the last tool message; "the user's
message" is the first user message (the task). Text tests are case-sensitive substring tests;
`tool_result_matches` takes a Python regular expression (`(?i)` for case-insensitive).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from mockprovider.scenarios import Conversation
from o200k import text_of


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
        return self.pattern.search(c.last_tool_result) is not None


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
