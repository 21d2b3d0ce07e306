"""The optional settings a request may carry that this mock reads no further than its check: a
table per API of what the real API takes (the committed OpenAPI subset in
tests/mockprovider/spec and the official SDKs' types say so), each refused as that API refuses it,
with a 400 naming the parameter.

`check(body, RULES)` looks only at the keys a body has (most bodies carry two to five), so the
tables cost nothing for a setting no request sends. A null value passes: every one of these is
optional, and the APIs read null as absent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mockprovider.errors import APIError, invalid
from mockprovider.reading.validation import MAX_INT, is_int, number_in

Rule = Callable[[Any, str], None]
"""`rule(value, key)`: returns if `value` is valid for `key`, raises the API's 400 otherwise."""


def check(body: dict[str, Any], rules: Mapping[str, Rule]) -> None:
    """A 400 for the first of `body`'s settings its rule refuses (each looked at only if present)."""
    for key, value in body.items():
        rule = rules.get(key)
        if rule is not None and value is not None:
            rule(value, key)


def _type_error(key: str, expected: str) -> APIError:
    return invalid(f"Invalid type for '{key}': expected {expected}.", param=key, code="invalid_type")


def number(low: float, high: float) -> Rule:
    """A decimal from `low` to `high` (the API's own words: `number_in`)."""
    return lambda value, key: number_in({key: value}, key, low, high)


def _shown(value: int) -> str:
    """A large integer as the API shows it (`1e+30`); past a float's range (1e308) from its digits,
    which float formatting would overflow on."""
    if value < 10**15:
        return str(value)
    if value < 10**300:
        return f"{value:.0e}"
    digits = str(value)  # the parser reads no integer longer than Python prints
    return f"{digits[0]}e+{len(digits) - 1}"


def integer(low: int, high: int = MAX_INT) -> Rule:
    def rule(value: Any, key: str) -> None:
        if not is_int(value):
            raise _type_error(key, "an integer")
        if value < low:
            raise invalid(f"Invalid '{key}': integer below minimum value. Expected a value >= {low}, "
                          f"but got {value} instead.", param=key, code="integer_below_min_value")
        if value > high:
            raise invalid(f"Invalid '{key}': integer above maximum value. Expected a value <= {high}, "
                          f"but got {_shown(value)} instead.", param=key, code="integer_above_max_value")
    return rule


_DIGITS = re.compile("-?[0-9]{1,20}")
"""An integer as a string, as protobuf's JSON takes it (longer: no 64-bit integer; refused)."""


def proto_integer(low: int, high: int) -> Rule:
    """Google's integer: protobuf's JSON reads an integral number (`40.0`, which google-genai
    sends for `top_k=40`, its type being a float) or a string of digits as the integer it is."""
    exact = integer(low, high)

    def rule(value: Any, key: str) -> None:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and _DIGITS.fullmatch(value):
            value = int(value)
        exact(value, key)
    return rule


def boolean(value: Any, key: str) -> None:
    if not isinstance(value, bool):
        raise _type_error(key, "a boolean")


def text(value: Any, key: str) -> None:
    if not isinstance(value, str):
        raise _type_error(key, "a string")


def one_of(*values: str) -> Rule:
    def rule(value: Any, key: str) -> None:
        if not isinstance(value, str) or value not in values:
            supported = ", ".join(f"'{v}'" for v in values)
            raise invalid(f"Invalid value for '{key}': {value!r:.60}. Supported values are: {supported}.",
                          param=key, code="invalid_value")
    return rule


def strings(max_items: int | None = None, *, alone: bool = False) -> Rule:
    """An array of strings (at most `max_items`), or, if `alone`, one string."""
    def rule(value: Any, key: str) -> None:
        if alone and isinstance(value, str):
            return
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _type_error(key, "a string or an array of strings" if alone else "an array of strings")
        if max_items is not None and len(value) > max_items:
            raise invalid(f"Invalid '{key}': array too long. Expected an array with maximum length "
                          f"{max_items}, but got an array with length {len(value)} instead.", param=key,
                          code="array_above_max_length")
    return rule


def items(rule: Rule) -> Rule:
    """An array, each item held to `rule` (named `key[i]`)."""
    def each(value: Any, key: str) -> None:
        if not isinstance(value, list):
            raise _type_error(key, "an array")
        for i, item in enumerate(value):
            rule(item, f"{key}[{i}]")
    return each


def fields(rules: Mapping[str, Rule]) -> Rule:
    """An object whose members named in `rules` are held to them (named `key.member`)."""
    def rule(value: Any, key: str) -> None:
        if not isinstance(value, dict):
            raise _type_error(key, "an object")
        for member, member_value in value.items():
            inner = rules.get(member)
            if inner is not None and member_value is not None:
                inner(member_value, f"{key}.{member}")
    return rule


def metadata(value: Any, key: str) -> None:
    """OpenAI's `metadata`: at most 16 string values, keys up to 64 characters, values up to 512."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _type_error(key, "an object of strings")
    if len(value) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in value.items()):
        raise invalid(f"Invalid '{key}': at most 16 pairs, keys of at most 64 characters and values of at "
                      "most 512.", param=key, code="invalid_value")


EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""`reasoning_effort` / `reasoning.effort`'s values (the spec's `ReasoningEffort`, the SDK's type)."""
VERBOSITY = one_of("low", "medium", "high")
SAMPLING = {
    "temperature": number(0, 2),
    "top_p": number(0, 1),
    "top_logprobs": integer(0, 20),
    "parallel_tool_calls": boolean,
    "store": boolean,
    "user": text,
    "safety_identifier": text,
    "prompt_cache_key": text,
    "metadata": metadata,
}
"""What Chat Completions and Responses share."""
_FORMAT = one_of("text", "json_object", "json_schema")

CHAT = {
    **SAMPLING,
    "presence_penalty": number(-2, 2),
    "frequency_penalty": number(-2, 2),
    "seed": integer(-(2**63), 2**63 - 1),
    "logprobs": boolean,
    "stop": strings(4, alone=True),
    "service_tier": one_of("auto", "default", "flex", "scale", "priority", "fast"),
    "reasoning_effort": one_of(*EFFORTS),
    "verbosity": VERBOSITY,
    "modalities": items(one_of("text", "audio")),
    "response_format": fields({"type": _FORMAT}),
}
"""Chat Completions' settings (the SDK's `CompletionCreateParamsBase`)."""

RESPONSES = {
    **SAMPLING,
    "truncation": one_of("auto", "disabled"),
    "service_tier": one_of("auto", "default", "flex", "scale", "priority", "fast", "ultrafast"),
    "max_tool_calls": integer(1),
    "background": boolean,
    "include": strings(),
    "reasoning": fields({"effort": one_of(*EFFORTS), "summary": one_of("auto", "concise", "detailed")}),
    "text": fields({"format": fields({"type": _FORMAT}), "verbosity": VERBOSITY}),
}
"""The Responses API's settings (the SDK's `ResponseCreateParamsBase`)."""

MESSAGES = {
    "temperature": number(0, 1),
    "top_p": number(0, 1),
    "top_k": integer(0),
    "stop_sequences": strings(),
    "service_tier": one_of("auto", "standard_only"),
    "metadata": fields({"user_id": text}),
    "thinking": fields({"type": one_of("enabled", "disabled", "adaptive", "between_tools"),
                        "budget_tokens": integer(1024)}),
}
"""Anthropic's Messages settings (the SDK's `MessageCreateParamsBase`)."""

_GENERATION = {
    "temperature": number(0, 2),
    "topP": number(0, 1),
    "topK": proto_integer(0, MAX_INT),
    "seed": proto_integer(-(2**31), 2**31 - 1),
    "presencePenalty": number(-2, 2),
    "frequencyPenalty": number(-2, 2),
    "stopSequences": strings(5),
    "responseMimeType": text,
    "responseLogprobs": boolean,
}
GENERATION_CONFIG = fields({**_GENERATION, **{
    "".join(f"_{c.lower()}" if c.isupper() else c for c in key): rule for key, rule in _GENERATION.items()}})
"""Gemini's `generationConfig` (the API reads either spelling of a member: `topK`, `top_k`)."""
