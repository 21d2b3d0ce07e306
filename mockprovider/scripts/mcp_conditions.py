"""The conditions a tool script may put on a call: tests over the call's arguments and its place.

The same language as the model's turns (`mockprovider.scripts.conditions`): an `if` is an object of
tests that must all hold, text tests are case-sensitive substring tests, `*_match` tests take
an RE2 pattern searched in the first 4,096 characters, and `not`, `all`, `any` combine them.
Only the subjects differ: a call has arguments and an index, not messages.

"The arguments' text" is the call's arguments as compact JSON (`{"path":"a.log"}`), keys in
the order the client sent them, so `arguments_contain: "\\"path\\":\\"a.log\\""` and
`arguments_match: "timeout"` both read what the agent asked for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mockprovider.scripts import conditions, values
from mockprovider.scripts.values import At

KEYS = ("arguments_contain", "arguments_match", "arguments_include", "call_at_least",
        "has_idempotency_key", "not", "all", "any")
MAX_NESTING = 32
"""As for the model's conditions: deeper `all`/`any`/`not` nesting is a mistake."""


@dataclass(frozen=True, kw_only=True)
class CallFacts:
    """What a condition may look at: one `tools/call` as the server received it."""

    name: str
    arguments: Mapping[str, Any]
    text: str
    """The arguments as compact JSON, in the client's key order."""
    index: int
    """0-based: how many calls of this tool the server answered before this one."""
    key: str | None
    """The idempotency key the client sent in `_meta.idempotencyKey`, if any."""

    @classmethod
    def of(cls, name: str, arguments: Mapping[str, Any] | None, index: int, key: str | None) -> CallFacts:
        arguments = arguments or {}
        text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str)
        return cls(name=name, arguments=arguments, text=text, index=index, key=key)


@dataclass(frozen=True, kw_only=True)
class ArgumentsContain:
    text: str

    def holds(self, call: CallFacts) -> bool:
        return self.text in call.text


@dataclass(frozen=True, kw_only=True)
class ArgumentsMatch:
    pattern: Any
    """A compiled RE2 pattern (`conditions.compile_pattern`)."""

    def holds(self, call: CallFacts) -> bool:
        return conditions.search(self.pattern, call.text)


@dataclass(frozen=True, kw_only=True)
class ArgumentsInclude:
    """Every named argument is present with exactly this value (JSON equality)."""

    values: Mapping[str, Any]

    def holds(self, call: CallFacts) -> bool:
        return all(name in call.arguments and _same(call.arguments[name], value)
                   for name, value in self.values.items())


@dataclass(frozen=True, kw_only=True)
class CallAtLeast:
    index: int

    def holds(self, call: CallFacts) -> bool:
        return call.index >= self.index


@dataclass(frozen=True, kw_only=True)
class HasIdempotencyKey:
    expected: bool

    def holds(self, call: CallFacts) -> bool:
        return (call.key is not None) == self.expected


def _same(sent: Any, wanted: Any) -> bool:
    # JSON equality: 1 and 1.0 are one number, but true is not 1 (Python says it is).
    if isinstance(sent, bool) or isinstance(wanted, bool):
        return type(sent) is type(wanted) and sent == wanted
    return sent == wanted


def condition(value: Any, at: At, depth: int = 0) -> Any:
    """An `if` on a tool script's call: an object of tests that must all hold."""
    if depth > MAX_NESTING:
        raise at.error(f"conditions nest deeper than {MAX_NESTING} levels")
    tests = values.obj(value, at, KEYS)
    if not tests:
        raise at.error(f"expected at least one condition: {', '.join(KEYS)}")
    parts = tuple(_test(key, tests[key], at / key, depth) for key in tests)
    return parts[0] if len(parts) == 1 else conditions.All(conditions=parts)


def _test(key: str, value: Any, at: At, depth: int) -> Any:
    match key:
        case "arguments_contain":
            return ArgumentsContain(text=values.string(value, at, nonempty=True))
        case "arguments_match":
            try:
                pattern = conditions.compile_pattern(values.string(value, at, nonempty=True))
            except conditions.PatternError as e:
                raise at.error(str(e)) from None
            return ArgumentsMatch(pattern=pattern)
        case "arguments_include":
            wanted = values.json_object(value, at)
            if not wanted:
                raise at.error("expected an object of at least one argument name and its value")
            return ArgumentsInclude(values=wanted)
        case "call_at_least":
            return CallAtLeast(index=int(values.number(value, at, 0, 1e9, integer=True)))
        case "has_idempotency_key":
            if not isinstance(value, bool):
                raise at.error(f"expected true or false, got {values.kind(value)}")
            return HasIdempotencyKey(expected=value)
        case "not":
            return conditions.Not(condition=condition(value, at, depth + 1))
        case "all" | "any":
            items = values.array(value, at, "conditions")
            parts = tuple(condition(item, at / i, depth + 1) for i, item in enumerate(items))
            return conditions.All(conditions=parts) if key == "all" else conditions.AnyOf(conditions=parts)
    raise AssertionError(f"unhandled condition key {key!r}")  # obj admitted only KEYS
