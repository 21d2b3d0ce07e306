"""aimock's JSON fixture files, read as scenario files.

An aimock file is `{"fixtures": [{"match": {...}, "response": {...}, ...}]}`: the first fixture
whose `match` fields all hold answers, whatever the turn. It becomes one scenario, named after
the file, whose every turn is that list of alternatives in file order (`after_last: "repeat"`),
each `match` an `if` and each `response` a reply. So `--scenarios` serves it beside our own
files, as the model named after the file.

What has an equivalent is converted; what has none (aimock's stateful `sequenceIndex`, its
random `jitter` and chaos, fields this mock does not model) is refused at start-up with the file,
the fixture's JSON path and the reason, never silently dropped. docs/scenarios.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mockprovider.scripts.parts import alternative
from mockprovider.scripts.values import At, ScenarioFileError, array, kind, number, obj, string

FIXTURE_KEYS = (
    "match", "response", "latency", "chunkSize", "streamingProfile", "truncateAfterChunks",
    "disconnectAfterMs", "chaos", "recordedTimings", "replaySpeed", "openRouterProcessing", "metadata",
)
RESPONSE_KEYS = (
    "content", "toolCalls", "blocks", "error", "status", "usage", "finishReason", "role", "reasoning",
    "webSearches", "id", "created", "model", "systemFingerprint",
)

_NO_EQUIVALENT = {
    "sequenceIndex": "it counts earlier matches, and this mock keeps no state between requests; "
                     "use turnIndex or a condition on the conversation",
    "model": "here the model name selects the scenario: request the model named after this file",
    "responseFormat": "conditions here read the conversation and the offered tools, not response_format",
    "context": "fixtures here are not scoped by a request header",
    "inputText": "this mock serves no embeddings",
    "predicate": "a function cannot be written in a JSON file",
    "chunkSize": "streamed deltas here count tokens, not characters (our reply key `chunk`)",
    "truncateAfterChunks": "this mock does not cut a stream from a fixture",
    "disconnectAfterMs": "this mock does not cut a stream from a fixture",
    "chaos": "faults here are deterministic options (`fault=500@T`), never random",
    "recordedTimings": "a reply here is paced by `latency` and `rate`, not per-frame timings",
    "replaySpeed": "a reply here is paced by `latency` and `rate`",
    "openRouterProcessing": "this mock serves no OpenRouter envelope",
    "webSearches": "this mock's replies carry no web searches",
    "id": "ids here are generated per reply",
    "created": "timestamps here are the reply's own",
    "systemFingerprint": "the fingerprint here is fixed",
}


_UNMATCHED = ("sequenceIndex", "model", "responseFormat", "context", "inputText", "predicate")
"""aimock's match fields with no equivalent here."""


def is_aimock(data: Any) -> bool:
    """Whether a parsed document is an aimock fixture file rather than one of our scenarios."""
    return isinstance(data, dict) and "fixtures" in data and "turns" not in data


def from_aimock(data: dict[str, Any], *, source: str) -> dict[str, Any]:
    """The scenario document an aimock fixture file stands for; `ScenarioFileError` for a field
    with no equivalent here."""
    at = At(source)
    doc = obj(data, at, ("fixtures",), required=("fixtures",))
    fixtures = array(doc["fixtures"], at / "fixtures", "fixtures")
    alternatives = [_fixture(f, at / "fixtures" / i) for i, f in enumerate(fixtures)]
    recorded = any("usage" in alternative for alternative in alternatives)
    scenario: dict[str, Any] = {
        "description": f"aimock fixtures from {Path(source).name}.",
        "turns": [alternatives],
        "after_last": "repeat",
    }
    if recorded:
        scenario["options"] = "usage=recorded"  # aimock serves a fixture's usage as written
    return scenario


def _refuse(at: At, key: str) -> None:
    raise at.error(f"aimock's {key!r} has no equivalent here: {_NO_EQUIVALENT[key]}")


def _fixture(value: Any, at: At) -> dict[str, Any]:
    fixture = obj(value, at, FIXTURE_KEYS, required=("match", "response"))
    for key in fixture:
        if key in _NO_EQUIVALENT:
            _refuse(at / key, key)
    reply = _checked(_response(fixture["response"], at / "response"), at / "response")
    if "latency" in fixture:  # aimock: milliseconds between streamed chunks; ours: one token each
        # At most a second: our slowest pace is one token a second.
        delay = number(fixture["latency"], at / "latency", 0, 1000)
        if delay > 0:
            reply["rate"] = min(1000 / delay, 1e9)
    if "streamingProfile" in fixture:
        reply |= _profile(fixture["streamingProfile"], at / "streamingProfile")
    condition = _match(fixture["match"], at / "match")
    return {"if": condition, **reply} if condition else reply


def _checked(reply: dict[str, Any], at: At) -> dict[str, Any]:
    """`reply`, unless our own format refuses a value in it: then the error names the aimock
    fixture it came from, not a path of the converted document that the file does not have."""
    try:
        alternative(reply, At("reply"), conditional=False)
    except ScenarioFileError as e:
        problem = str(e).removeprefix("reply: $").lstrip(".").removeprefix(": ")
        raise at.error(f"as this mock's reply, {problem}") from None
    return reply


def _profile(value: Any, at: At) -> dict[str, Any]:
    profile = obj(value, at, ("ttft", "tps", "jitter"))
    if profile.get("jitter", 0) != 0:
        raise (at / "jitter").error("aimock's 'jitter' has no equivalent here: pacing here is never random")
    pace: dict[str, Any] = {}
    if "ttft" in profile:
        pace["latency"] = number(profile["ttft"], at / "ttft", 0, 300_000)
    if "tps" in profile:
        pace["rate"] = number(profile["tps"], at / "tps", 1, 1e9)
    return pace


def _turn_is(value: Any, at: At) -> dict[str, Any]:
    turn = int(number(value, at, 0, 1e9, integer=True))
    return {"turn_at_least": turn, "not": {"turn_at_least": turn + 1}}


def _systems(value: Any, at: At) -> dict[str, Any]:
    if isinstance(value, list):
        texts = [string(v, at / i, nonempty=True) for i, v in enumerate(array(value, at, "strings"))]
        return {"all": [{"system_contains": text} for text in texts]}
    return {"system_contains": string(value, at, nonempty=True)}


def _has_tool_result(value: Any, at: At) -> dict[str, Any]:
    if not isinstance(value, bool):
        raise at.error(f"expected true or false, got {kind(value)}")
    return {"after_tool_result": value}


def _endpoint(value: Any, at: At) -> dict[str, Any]:
    if value != "chat":
        raise at.error(f"aimock's endpoint {value!r} has no equivalent here: this mock serves chat only")
    return {}


_MATCHERS: dict[str, Callable[[Any, At], dict[str, Any]]] = {
    "userMessage": lambda v, at: {"last_user_contains": string(v, at, nonempty=True)},
    "systemMessage": _systems,
    "toolName": lambda v, at: {"has_tool": string(v, at, nonempty=True)},
    "toolCallId": lambda v, at: {"answers_call": string(v, at, nonempty=True)},
    # aimock reads the request's last message when it is a tool result: the newest tool result,
    # with one after the last user message.
    "toolResultContains": lambda v, at: {"tool_result_contains": string(v, at, nonempty=True),
                                         "after_tool_result": True},
    "turnIndex": _turn_is,
    "hasToolResult": _has_tool_result,
    "endpoint": _endpoint,
}


def _match(value: Any, at: At) -> dict[str, Any]:
    """The `if` of a fixture: every match field as a condition, all of which must hold."""
    match = obj(value, at, (*_MATCHERS, *_UNMATCHED))
    tests = []
    for key, field in match.items():
        if key in _NO_EQUIVALENT:
            _refuse(at / key, key)
        tests.append(_MATCHERS[key](field, at / key))
    tests = [test for test in tests if test]
    return tests[0] if len(tests) == 1 else ({"all": tests} if tests else {})


def _response(value: Any, at: At) -> dict[str, Any]:
    response = obj(value, at, RESPONSE_KEYS)
    for key in response:
        if key in _NO_EQUIVALENT:
            _refuse(at / key, key)
    if "role" in response and response["role"] != "assistant":
        raise (at / "role").error("aimock's 'role' has no equivalent here: replies are the assistant's")
    if "error" in response:
        return _error(response, at)
    if "status" in response:
        raise (at / "status").error("a status belongs to an error response (with 'error')")
    reply: dict[str, Any] = {}
    if "blocks" in response:
        reply = _blocks(response["blocks"], at / "blocks")
    else:
        if "content" in response:
            reply["content"] = string(response["content"], at / "content")
        if "toolCalls" in response:
            calls = array(response["toolCalls"], at / "toolCalls", "tool calls")
            reply["tool_calls"] = [_call(c, at / "toolCalls" / i) for i, c in enumerate(calls)]
    if not reply:
        raise at.error("expected 'content', 'toolCalls', 'blocks' or 'error'")
    if "finishReason" in response:
        natural = "tool_calls" if "tool_calls" in reply else "stop"
        if response["finishReason"] != natural:
            raise (at / "finishReason").error(
                f"aimock's finishReason {response['finishReason']!r} has no equivalent here: a reply "
                f"like this one finishes with {natural!r} (or 'length' under max_tokens)"
            )
    if "usage" in response:
        reply["usage"] = _usage(response["usage"], at / "usage")
    if "reasoning" in response:
        reply["reasoning"] = response["reasoning"]  # our `reasoning` checks it: text, or a count
    return reply


def _error(response: dict[str, Any], at: At) -> dict[str, Any]:
    extra = [k for k in response if k not in ("error", "status")]
    if extra:
        raise (at / extra[0]).error("an aimock error response carries only 'error' and 'status' here")
    error = obj(response["error"], at / "error", ("message", "type", "code"), required=("message",))
    status = response.get("status", 500)
    return {"error": {"status": status, **error}}


def _call(value: Any, at: At) -> dict[str, Any]:
    call = obj(value, at, ("name", "arguments", "id"), required=("name",))
    return {key: call[key] for key in ("name", "arguments", "id") if key in call}


def _blocks(value: Any, at: At) -> dict[str, Any]:
    """Ordered blocks, when the text comes first: our replies send the text before the calls."""
    texts, calls = [], []
    for i, block in enumerate(array(value, at, "blocks")):
        b = obj(block, at / i, ("type", "text", "name", "arguments", "id"), required=("type",))
        if b["type"] == "text":
            if calls:
                raise (at / i).error("aimock's text after a tool call has no equivalent here: a reply "
                                     "sends its text before its tool calls")
            texts.append(string(b.get("text"), at / i / "text"))
        elif b["type"] == "toolCall":
            calls.append(_call({k: v for k, v in b.items() if k != "type"}, at / i))
        else:
            raise (at / i / "type").error(f"expected 'text' or 'toolCall', got {b['type']!r}")
    reply: dict[str, Any] = {"content": "".join(texts)} if texts else {}
    return reply | ({"tool_calls": calls} if calls else {})


def _usage(value: Any, at: At) -> dict[str, Any]:
    names = {"prompt_tokens": ("prompt_tokens", "input_tokens", "promptTokenCount"),
             "completion_tokens": ("completion_tokens", "output_tokens", "candidatesTokenCount")}
    usage = obj(value, at, (*names["prompt_tokens"], *names["completion_tokens"], "total_tokens",
                            "totalTokenCount"))
    out = {}
    for ours, theirs in names.items():
        given = [k for k in theirs if k in usage]
        if not given:
            raise at.error(f"expected one of {', '.join(theirs)}: replaying usage needs both counts")
        out[ours] = usage[given[0]]
    return out
