"""Checks a chat-completions request body and names the first thing wrong with it.

Everything here raises `APIError` (a 4xx with an OpenAI-shaped body); nothing a client sends
can turn into a 500. Unknown sampling parameters pass through untouched, as OpenAI's do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import repeat
from typing import Any, NamedTuple

from mockprovider import tool_choice, transcript
from mockprovider.errors import APIError, invalid, missing
from mockprovider.tool_choice import AUTO, ToolChoice
from mockprovider.transcript import ROLES, Known, Transcript

__all__ = ["MAX_DEPTH", "ROLES", "ChatRequest", "chat_request", "check_depth", "parse_json"]


class ChatRequest(NamedTuple):
    """A checked chat request (a NamedTuple for speed: see `wire.Completion`; results/bench.md,
    speed tricks: "ChatRequest a NamedTuple")."""

    model: str
    transcript: Transcript
    """The messages checked and (most of them) counted, with their turn and tool text."""
    tools: list[dict[str, Any]] | None
    tool_choice: ToolChoice
    max_tokens: int | None
    stream: bool
    include_usage: bool


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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(body: dict[str, Any], key: str) -> int | None:
    """`body[key]` if it is an integer >= 1; None if absent or null; a 400 otherwise."""
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value) or value < 1:
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


def _max_tokens(body: dict[str, Any]) -> int | None:
    """`max_completion_tokens` wins over the older `max_tokens`; both must be valid if given."""
    newer, older = positive_int(body, "max_completion_tokens"), positive_int(body, "max_tokens")
    return newer if newer is not None else older


def chat_request(body: Any, known: Known | None = None) -> ChatRequest:
    """A validated request; `APIError` naming the offending parameter otherwise.

    `known` is what the parser found remembered about `body["messages"]` (see memo.py).
    """
    if not isinstance(body, dict):
        raise invalid("Invalid request body: expected a JSON object.")
    model = body.get("model")
    if model is None:
        raise missing("model")
    if not isinstance(model, str) or not model:
        raise invalid("Invalid 'model': expected a non-empty string.", param="model")
    messages = transcript.read(body.get("messages"), known)
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(map(isinstance, tools, repeat(dict)))):
        raise invalid("Invalid 'tools': expected an array of objects.", param="tools")
    choice = AUTO
    if "tool_choice" in body:
        choice = tool_choice.chat_choice(body["tool_choice"])
        tool_choice.check(choice, tools)
    # Most bodies carry none of the optional fields below: each is looked at only when present.
    stream = flag(body, "stream") if "stream" in body else False
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid("Invalid 'stream_options': expected an object.", param="stream_options")
    if options and not isinstance(options.get("include_usage", False), bool | None):
        raise invalid("Invalid 'stream_options.include_usage': expected a boolean.",
                      param="stream_options.include_usage")
    n = body.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise APIError(400, "This scripted provider produces exactly one choice; 'n' must be 1.", param="n")
    return ChatRequest(
        model=model,
        transcript=messages,
        tools=tools,
        tool_choice=choice,
        max_tokens=_max_tokens(body) if "max_tokens" in body or "max_completion_tokens" in body else None,
        stream=stream,
        include_usage=bool(stream and options and options.get("include_usage")),
    )
