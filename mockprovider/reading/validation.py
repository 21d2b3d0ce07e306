"""Checks a chat-completions request body and names the first thing wrong with it.

Everything here raises `APIError` (a 4xx with an OpenAI-shaped body); nothing a client sends
can turn into a 500. Unknown sampling parameters pass through untouched, as OpenAI's do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mockprovider.errors import APIError, invalid
from mockprovider.reading.transcript import ROLES, Known

__all__ = ["MAX_DEPTH", "ROLES", "check_depth", "is_int", "parse_json", "positive_int"]


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
    were walked when the request they came in was served.
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH or type(body) is not dict:
        return
    items: list[tuple[Any, int]] = []
    for key, value in body.items():
        if type(value) is not dict and type(value) is not list:
            continue
        if key == "messages" and known is not None and known.count and type(value) is list:
            items.extend((m, 3) for m in value[known.count :] if type(m) is dict or type(m) is list)
        else:
            items.append((value, 2))
    if _deeper_than(MAX_DEPTH, items):
        raise too_deep()


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(body: dict[str, Any], key: str) -> int | None:
    """`body[key]` if it is an integer >= 1; None if absent or null; a 400 otherwise."""
    value = body.get(key)
    if value is None:
        return None
    if not is_int(value) or value < 1:
        raise invalid(f"Invalid '{key}': expected an integer >= 1, got {value!r}.", param=key)
    return value


def flag(body: dict[str, Any], key: str) -> bool:
    """`body[key]` if it is a boolean; False if absent or null; a 400 otherwise."""
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"Invalid '{key}': expected a boolean.", param=key)
    return value
