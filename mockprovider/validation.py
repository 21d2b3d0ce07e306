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

__all__ = ["ROLES", "ChatRequest", "chat_request", "parse_json"]


class ChatRequest(NamedTuple):
    """A checked chat request (a NamedTuple for speed: see `wire.Completion`)."""

    model: str
    transcript: Transcript
    """The messages checked and (most of them) counted, with their turn and tool text."""
    tools: list[dict[str, Any]] | None
    tool_choice: ToolChoice
    max_tokens: int | None
    stream: bool
    include_usage: bool


def parse_json(raw: bytes, loads: Callable[[bytes], Any] = json.loads) -> Any:
    """`loads(raw)`, its errors worded for the client (`memo.parse` is a faster `json.loads`)."""
    try:
        return loads(raw)
    except (ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError and invalid UTF-8 (UnicodeDecodeError).
        raise invalid(
            f"We could not parse the JSON body of your request ({type(e).__name__}: {e}). "
            "The OpenAI API expects a JSON payload."
        ) from None


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
