"""Checks a chat-completions request body and names the first thing wrong with it.

Everything here raises `APIError` (a 4xx with an OpenAI-shaped body); nothing a client sends
can turn into a 500. Unknown sampling parameters pass through untouched, as OpenAI's do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from mockprovider.errors import APIError, invalid
from mockprovider.offload import LARGE_BYTES, parse_yielding
from mockprovider.reading.transcript import ROLES, Known

__all__ = ["MAX_DEPTH", "MAX_INT", "ROLES", "check_depth", "is_int", "lone_surrogate", "number_in",
           "parse_json", "positive_int", "refuse_lone_surrogates", "wide"]


MAX_DEPTH = 64
"""The deepest nesting of arrays and objects a request body may have, in every wire format (the
body itself is level 1; a tool's `parameters` / `input_schema` count where they sit). Deeper is a
400 in the format's own shape, so no reader, counter or echo downstream ever recurses further."""


def too_deep() -> APIError:
    """The 400 for a body past MAX_DEPTH (the caller's format renders it in its own shape)."""
    return invalid(
        f"The request body nests arrays and objects more than {MAX_DEPTH} levels deep, "
        "which is this mock's documented limit.",
        code="too_deep",
    )


OPENAI_UNPARSABLE = (
    "We could not parse the JSON body of your request ({error}). The OpenAI API expects a JSON payload."
)
"""How a body that is not JSON is refused, `{error}` its parser's sentence; each format has its own."""


def parse_json(raw: bytes, loads: Callable[[bytes], Any] = json.loads, *,
               unparsable: str = OPENAI_UNPARSABLE) -> Any:
    """`loads(raw)`, its errors worded for the client (`memo.parse` is a faster `json.loads`)."""
    if loads is json.loads and len(raw) > LARGE_BYTES:
        loads = parse_yielding
    try:
        return loads(raw)
    except RecursionError:  # far deeper than MAX_DEPTH: the parser gave up first
        raise too_deep() from None
    except ValueError as e:  # JSONDecodeError and invalid UTF-8 (UnicodeDecodeError)
        raise invalid(unparsable.format(error=f"{type(e).__name__}: {e}")) from None


def parse_body(raw: bytes, *, unparsable: str = OPENAI_UNPARSABLE) -> Any:
    """A request body as every format reads one: parsed, then held to the one nesting bound."""
    body = parse_json(raw, unparsable=unparsable)
    check_depth(raw, body)
    return body


def _deeper_than(limit: int, items: list[tuple[Any, int]]) -> bool:
    """Whether any of the (value, its level) pairs nests past `limit` (iterative: no recursion)."""
    while items:
        value, level = items.pop()
        if level > limit:
            return True
        children = value.values() if type(value) is dict else value
        items.extend((c, level + 1) for c in children if type(c) is dict or type(c) is list)
    return False


def check_depth(raw: bytes, body: Any, known: Known | None = None) -> None:
    """A 400 if `body` (parsed from `raw`) nests deeper than MAX_DEPTH.

    A body with at most MAX_DEPTH brackets cannot nest deeper (nearly every short request: two
    byte counts). Otherwise the parsed body is walked, except the messages `known` covers, which
    were walked when the request they came in was served. A body whose messages `known` covers
    is walked without counting: counting reads every byte of a long transcript, twice, to skip a
    walk of the few messages after it (results/bench.md, speed tricks: "brackets of a
    remembered transcript not counted").
    """
    if type(body) is not dict:
        return
    remembered = known is not None and known.count
    if not remembered and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return
    items: list[tuple[Any, int]] = []
    for key, value in body.items():
        if type(value) is not dict and type(value) is not list:
            continue
        if key == "messages" and remembered and type(value) is list:
            items.extend((m, 3) for m in value[known.count :] if type(m) is dict or type(m) is list)
        else:
            items.append((value, 2))
    if _deeper_than(MAX_DEPTH, items):
        raise too_deep()


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MAX_INT = 2**31 - 1
"""The largest integer the real APIs take for a token count (their integers are 32-bit)."""


def positive_int(body: dict[str, Any], key: str) -> int | None:
    """`body[key]` if it is an integer from 1 to MAX_INT; None if absent or null; a 400 otherwise."""
    value = body.get(key)
    if value is None:
        return None
    if not is_int(value) or value < 1:
        raise invalid(f"Invalid '{key}': expected an integer >= 1, got {value!r}.", param=key)
    if value > MAX_INT:
        shown = value if value < 10**15 else f"{value:.0e}"  # as the API, which reads it as a float
        raise invalid(f"Invalid '{key}': integer above maximum value. Expected a value <= {MAX_INT}, "
                      f"but got {shown} instead.", param=key, code="integer_above_max_value")
    return value


def number_in(body: dict[str, Any], key: str, low: float, high: float) -> None:
    """A 400 unless `body[key]` is absent, null or a number from `low` to `high`, as the real
    APIs check sampling parameters (`temperature`)."""
    value = body[key]
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise invalid(f"Invalid type for '{key}': expected a decimal, but got {_json_type(value)} instead.",
                      param=key, code="invalid_type")
    if value < low:
        raise invalid(f"Invalid '{key}': decimal below minimum value. Expected a value >= {low:g}, but got "
                      f"{value} instead.", param=key, code="decimal_below_min_value")
    if value > high:
        raise invalid(f"Invalid '{key}': decimal above maximum value. Expected a value <= {high:g}, but got "
                      f"{value} instead.", param=key, code="decimal_above_max_value")
    if value != value:  # NaN, which the lenient JSON parser takes
        raise invalid(f"Invalid '{key}': expected a decimal, but got NaN instead.", param=key,
                      code="invalid_value")


def _json_type(value: Any) -> str:
    """`value`'s JSON type, as the real APIs name it in their type errors."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else "null" if value is None else "a number"


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
                               rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
"""A high surrogate escape not followed by a low one, or a low one not after a high one (a
sign only: `\\\\ud800` is an escaped backslash, so a match is confirmed on the parsed body)."""
_SURROGATE = re.compile("[\ud800-\udfff]")
"""What the parser leaves of a lone surrogate escape (it joins a valid pair into one character)."""


def lone_surrogate(raw: bytes, body: Any, known: Known | None = None) -> str | None:
    """The path of the first string in `body` (parsed from `raw`) holding a lone surrogate, which
    the real OpenAI and Anthropic APIs refuse as invalid Unicode; None when none does.

    In a UTF-8 body only a `\\ud8xx`-`\\udfxx` escape can put one there (raw UTF-8 surrogates are
    refused first), so nearly every body is settled by one byte search (clients write non-ASCII
    text as UTF-8, and a `\\u` escape is rare), the rest by a regex from the first escape on. The
    bytes of messages `known` remembers (`known.span`) are not searched: they passed this check in
    the request that brought them, before they were remembered, and a long transcript is most of a
    body's bytes (results/bench.md, speed tricks: "remembered transcript not searched for escapes").
    A UTF-16 or -32 body, whose escapes those byte searches cannot see, is walked whole (`memo`
    reads UTF-8 only: a body whose messages `known` covers is UTF-8)."""
    if known is not None or not wide(raw):
        first = _outside(raw, b"\\u", known.span if known is not None else None)
        if first < 0 or not _SURROGATE_ESCAPE.search(raw, first):
            return None
    items: list[tuple[Any, str]] = [(body, "")]
    while items:
        value, path = items.pop()
        if type(value) is str:
            if _SURROGATE.search(value):
                return path or "body"
        elif type(value) is dict:
            for key, child in reversed(value.items()):
                if _SURROGATE.search(key):
                    return path or "body"
                items.append((child, f"{path}.{key}" if path else key))
        elif type(value) is list:
            items.extend((child, f"{path}[{i}]") for i, child in reversed(list(enumerate(value))))
    return None


def _outside(raw: bytes, needle: bytes, span: tuple[int, int] | None) -> int:
    """Where `needle` first is in `raw` outside `span` (remembered bytes, checked before), or -1."""
    if span is None:
        return raw.find(needle)
    first = raw.find(needle, 0, span[0])
    return raw.find(needle, span[1]) if first < 0 else first


def wide(raw: bytes) -> bool:
    """Whether JSON text `raw` is in UTF-16 or -32 rather than UTF-8: its first character is
    ASCII, as every JSON text's is, so one of its first four bytes is zero (BOM or not), which
    in UTF-8 JSON none is. A test of four bytes, to keep the escape searches' common case quick."""
    return raw.find(b"\x00", 0, 4) >= 0


_RAW_SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")
"""A surrogate's UTF-8 form (ED A0-BF ..), which no UTF-8 allows; in valid UTF-8, ED is followed
by 80-9F only."""


def refuse_undecodable(raw: bytes, unparsable: str = OPENAI_UNPARSABLE, known: Known | None = None) -> None:
    """The 400 of a body not valid in its encoding, for a surrogate written as a raw code unit:
    Python's parser decodes those leniently, where the real OpenAI and Anthropic APIs refuse them
    as they refuse any invalid UTF-8. One byte search settles nearly every UTF-8 body; a UTF-16 or
    -32 one (rare; never one `known` covers) is decoded strictly (in UTF-16 a high and a low unit
    in turn are one character)."""
    if known is None and wide(raw):
        encoding = json.detect_encoding(raw)
    else:
        first = _outside(raw, b"\xed", known.span if known is not None else None)
        if first < 0 or not _RAW_SURROGATE.search(raw, first):
            return
        encoding = "utf-8"
    try:
        raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise invalid(unparsable.format(error=f"{type(e).__name__}: {e}")) from None


def refuse_lone_surrogates(raw: bytes, body: Any, known: Known | None = None) -> None:
    """A 400 naming the string if `body` holds a lone surrogate (see `lone_surrogate`), and the
    undecodable-body 400 if `raw` holds a surrogate's raw code units (see `refuse_undecodable`),
    in whichever of JSON's encodings `raw` is."""
    refuse_undecodable(raw, known=known)
    if (path := lone_surrogate(raw, body, known)) is not None:
        raise invalid(f"Invalid '{path}': the string holds a lone surrogate, which is not valid Unicode; "
                      "the request body is not valid JSON (no low surrogate in string).",
                      param=path, code="invalid_value")


def flag(body: dict[str, Any], key: str) -> bool:
    """`body[key]` if it is a boolean; False if absent or null; a 400 otherwise."""
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"Invalid '{key}': expected a boolean.", param=key)
    return value
