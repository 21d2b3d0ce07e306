"""A scenario file's replies and conditions, checked and compiled once, at start-up.

A reply says what the model answers — `content`, `tool_calls`, both (the text comes first), or
an `error` instead — and may pace itself: `latency` (ms before it starts: its time to first
token), `rate` (tokens per second when streamed), `chunk` (tokens per streamed delta). A
recorded `usage` rides along and is served only under the `usage=recorded` option.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from mockprovider.errors import ScriptedError
from mockprovider.scripts.conditions import (
    AfterToolResult,
    All,
    AnswersCall,
    AnyOf,
    AnyToolResultContains,
    Condition,
    HasTool,
    LastUserContains,
    LastUserMatches,
    Not,
    PatternError,
    SystemContains,
    ToolResultContains,
    ToolResultMatches,
    ToolResultOf,
    TurnAtLeast,
    UserContains,
    compile_pattern,
)
from mockprovider.scripts.scenarios import Reply, ToolCall, Usage
from mockprovider.scripts.values import At, array, kind, number, obj, string, unicode

ANSWER_KEYS = ("content", "tool_calls", "error")
PACE_KEYS = ("latency", "rate", "chunk", "usage", "reasoning")
REPLY_KEYS = (*ANSWER_KEYS, *PACE_KEYS)
CALL_KEYS = ("name", "arguments", "id")
ERROR_KEYS = ("status", "message", "type", "code", "headers")
FRAMING_HEADERS = ("content-length", "transfer-encoding", "connection", "content-type", "content-encoding")
"""Set by the server from the body it sends: a scripted value would break the response (or, for
content-encoding, make the client fail to decode a body that is sent plain)."""
USAGE_KEYS = ("prompt_tokens", "completion_tokens")
CONDITION_KEYS = (
    "tool_result_contains", "any_tool_result_contains", "tool_result_matches", "tool_result_of",
    "user_contains", "last_user_contains", "last_user_matches", "system_contains", "has_tool",
    "answers_call", "after_tool_result", "turn_at_least", "not", "all", "any",
)
MAX_NESTING = 32
"""Deepest `all`/`any`/`not` nesting accepted; deeper is a mistake, and would recurse per request."""
MAX_LATENCY_MS = 300_000.0
"""As the `latency` option: a reply waits at most five minutes."""


@dataclass(frozen=True, kw_only=True)
class CallTemplate:
    name: str
    arguments: str
    """Sent verbatim: an object from the file is serialised once, at load."""
    id: str | None
    """None: a deterministic id from the turn and position, `call_<turn>_<index>`."""


@dataclass(frozen=True, kw_only=True)
class Alternative:
    when: Condition | None
    """None: always."""
    answer: Reply
    """The reply, but for its tool calls, whose ids may depend on the turn."""
    calls: tuple[CallTemplate, ...]

    def reply(self, turn: int) -> Reply:
        if not self.calls:
            return self.answer
        return replace(self.answer, tool_calls=tuple(
            ToolCall(id=call.id or f"call_{turn}_{index}", name=call.name, arguments=call.arguments)
            for index, call in enumerate(self.calls)
        ))


def turn_of(value: Any, at: At) -> tuple[Alternative, ...]:
    """`turns[i]`: one reply, or an array of alternatives."""
    if isinstance(value, dict):
        return (alternative(value, at, conditional=False),)
    if isinstance(value, list):
        alternatives = array(value, at, "alternatives")
        return tuple(alternative(a, at / i, conditional=True) for i, a in enumerate(alternatives))
    raise at.error(f"expected a reply object or an array of alternatives, got {kind(value)}")


def alternative(value: Any, at: At, *, conditional: bool) -> Alternative:
    allowed = ("if", *REPLY_KEYS) if conditional else REPLY_KEYS
    if not conditional and isinstance(value, dict) and "if" in value:
        raise (at / "if").error("'if' belongs on an alternative: put this reply in an array of alternatives")
    reply = obj(value, at, allowed)
    given = [key for key in ANSWER_KEYS if key in reply]
    if not given:
        raise at.error("expected 'content', 'tool_calls' (or both), or 'error'")
    if "error" in reply and len(given) > 1:
        raise at.error("an 'error' reply carries no 'content' or 'tool_calls'")
    when = condition(reply["if"], at / "if") if "if" in reply else None
    calls = ()
    if "tool_calls" in reply:
        listed = array(reply["tool_calls"], at / "tool_calls", "tool calls")
        calls = tuple(_call(c, at / "tool_calls" / i) for i, c in enumerate(listed))
    answer = Reply(
        content=string(reply["content"], at / "content") if "content" in reply else None,
        error=_error(reply["error"], at / "error") if "error" in reply else None,
        latency_ms=number(reply.get("latency", 0), at / "latency", 0, MAX_LATENCY_MS),
        rate_tps=number(reply["rate"], at / "rate", 1, 1e9) if "rate" in reply else None,
        chunk=int(number(reply.get("chunk", 1), at / "chunk", 1, 1_000_000, integer=True)),
        usage=_usage(reply["usage"], at / "usage") if "usage" in reply else None,
        reasoning=_reasoning(reply["reasoning"], at / "reasoning") if "reasoning" in reply else None,
    )
    return Alternative(when=when, answer=answer, calls=calls)


def _reasoning(value: Any, at: At) -> str | int:
    """Reasoning text (shown where the API shows it), or a count of hidden reasoning tokens."""
    if isinstance(value, str):
        return string(value, at, nonempty=True)
    return int(number(value, at, 1, 1_000_000, integer=True))


def _call(value: Any, at: At) -> CallTemplate:
    call = obj(value, at, CALL_KEYS, required=("name",))
    arguments = call.get("arguments", {})
    if isinstance(arguments, dict):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise (at / "arguments").error("expected JSON values only (no dates, NaN or infinity)") from None
    elif not isinstance(arguments, str):
        raise (at / "arguments").error(f"expected an object or a JSON string, got {kind(arguments)}")
    return CallTemplate(
        name=string(call["name"], at / "name", nonempty=True),
        arguments=unicode(arguments, at / "arguments"),
        id=string(call["id"], at / "id", nonempty=True) if "id" in call else None,
    )


def _error(value: Any, at: At) -> ScriptedError:
    error = obj(value, at, ERROR_KEYS, required=("status", "message"))
    headers = error.get("headers", {})
    if not isinstance(headers, dict):
        raise (at / "headers").error(f"expected an object of header names and values, got {kind(headers)}")
    seen: dict[str, str] = {}
    for name, header in headers.items():
        if not all(33 <= ord(ch) <= 126 and ch not in '()<>@,;:\\"/[]?={}' for ch in name) or not name:
            raise (at / "headers" / name).error("not a valid HTTP header name")
        if (first := seen.setdefault(name.lower(), name)) != name:
            raise (at / "headers" / name).error(f"names the header {first!r} again (names ignore case)")
        if name.lower() in FRAMING_HEADERS:
            raise (at / "headers" / name).error("set by the server from the body it sends; leave it out")
        text = string(header, at / "headers" / name)
        # What the HTTP server refuses to send (it drops the connection, with no response at all).
        if any(ord(ch) < 32 or ord(ch) == 127 or ord(ch) > 255 for ch in text):
            raise (at / "headers" / name).error("a header value may hold no control or non-Latin-1 character")
        if text != text.strip(" "):
            raise (at / "headers" / name).error("a header value has no leading or trailing space")
    return ScriptedError(
        int(number(error["status"], at / "status", 400, 599, integer=True)),
        string(error["message"], at / "message"),
        type=string(error["type"], at / "type", nonempty=True) if "type" in error else None,
        code=string(error["code"], at / "code", nonempty=True) if "code" in error else None,
        headers={name.lower(): value for name, value in headers.items()},
    )


def _usage(value: Any, at: At) -> Usage:
    usage = obj(value, at, USAGE_KEYS, required=USAGE_KEYS)
    return Usage(**{key: int(number(usage[key], at / key, 0, 1e12, integer=True)) for key in USAGE_KEYS})


def condition(value: Any, at: At, depth: int = 0) -> Condition:
    """An `if`: an object of tests that must all hold."""
    if depth > MAX_NESTING:
        raise at.error(f"conditions nest deeper than {MAX_NESTING} levels")
    tests = obj(value, at, CONDITION_KEYS)
    if not tests:
        raise at.error(f"expected at least one condition: {', '.join(CONDITION_KEYS)}")
    parts = tuple(_test(key, tests[key], at / key, depth) for key in tests)
    # Several keys in one object must all hold, as in a query.
    return parts[0] if len(parts) == 1 else All(conditions=parts)


_TEXT_TESTS = {
    "tool_result_contains": lambda text: ToolResultContains(text=text),
    "any_tool_result_contains": lambda text: AnyToolResultContains(text=text),
    "user_contains": lambda text: UserContains(text=text),
    "last_user_contains": lambda text: LastUserContains(text=text),
    "system_contains": lambda text: SystemContains(text=text),
    "has_tool": lambda name: HasTool(name=name),
    "tool_result_of": lambda name: ToolResultOf(name=name),
    "answers_call": lambda call_id: AnswersCall(call_id=call_id),
}


def _test(key: str, value: Any, at: At, depth: int) -> Condition:
    if key in _TEXT_TESTS:
        return _TEXT_TESTS[key](string(value, at, nonempty=True))
    match key:
        case "tool_result_matches" | "last_user_matches":
            try:
                pattern = compile_pattern(string(value, at, nonempty=True))
            except PatternError as e:
                raise at.error(str(e)) from None
            if key == "tool_result_matches":
                return ToolResultMatches(pattern=pattern)
            return LastUserMatches(pattern=pattern)
        case "after_tool_result":
            if not isinstance(value, bool):
                raise at.error(f"expected true or false, got {kind(value)}")
            return AfterToolResult(expected=value)
        case "turn_at_least":
            return TurnAtLeast(turn=int(number(value, at, 0, 1e9, integer=True)))
        case "not":
            return Not(condition=condition(value, at, depth + 1))
        case "all" | "any":
            items = array(value, at, "conditions")
            parts = tuple(condition(item, at / i, depth + 1) for i, item in enumerate(items))
            return All(conditions=parts) if key == "all" else AnyOf(conditions=parts)
    raise AssertionError(f"unhandled condition key {key!r}")  # obj admitted only CONDITION_KEYS
