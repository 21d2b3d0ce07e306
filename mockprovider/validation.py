"""Checks a chat-completions request body and names the first thing wrong with it.

Everything here raises `APIError` (a 4xx with an OpenAI-shaped body); nothing a client sends
can turn into a 500. Unknown sampling parameters pass through untouched, as OpenAI's do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mockprovider.errors import APIError, invalid

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    max_tokens: int | None
    stream: bool
    include_usage: bool


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError and invalid UTF-8 (UnicodeDecodeError).
        raise invalid(
            f"We could not parse the JSON body of your request ({type(e).__name__}: {e}). "
            "The OpenAI API expects a JSON payload."
        ) from None


def _missing(param: str) -> APIError:
    return invalid(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_content(value: Any, param: str) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, list) and all(
        isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in value
    ):
        return
    raise invalid(f"Invalid type for '{param}': expected a string, an array of parts, or null.", param=param)


def _check_tool_calls(calls: Any, param: str) -> list[str]:
    if not isinstance(calls, list):
        raise invalid(f"Invalid type for '{param}': expected an array.", param=param)
    ids = []
    for j, call in enumerate(calls):
        p = f"{param}[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and isinstance(fn, dict)
            and isinstance(fn.get("name"), str)
            and isinstance(fn.get("arguments"), str)
        ):
            raise invalid(
                f"Invalid '{p}': a tool call needs a string 'id' and a 'function' with string "
                "'name' and 'arguments'.",
                param=p,
            )
        ids.append(call["id"])
    return ids


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    if messages is None:
        raise _missing("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("Invalid 'messages': expected a non-empty array of messages.", param="messages")
    seen_calls: set[str] = set()
    for i, m in enumerate(messages):
        p = f"messages[{i}]"
        if not isinstance(m, dict):
            raise invalid(f"Invalid type for '{p}': expected an object.", param=p)
        role = m.get("role")
        if role not in ROLES:
            raise invalid(
                f"Invalid value for '{p}.role': {role!r}. Supported values are: "
                + ", ".join(repr(r) for r in ROLES) + ".",
                param=f"{p}.role",
                code="invalid_value",
            )
        _check_content(m.get("content"), f"{p}.content")
        if "name" in m and not isinstance(m["name"], str):
            raise invalid(f"Invalid type for '{p}.name': expected a string.", param=f"{p}.name")
        # Checked on every role: the token count reads tool_calls wherever they appear.
        if m.get("tool_calls") is not None:
            seen_calls.update(_check_tool_calls(m["tool_calls"], f"{p}.tool_calls"))
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise _missing(f"{p}.tool_call_id")
            if call_id not in seen_calls:
                raise invalid(
                    f"Invalid parameter: '{p}' with role 'tool' answers tool_call_id {call_id!r}, "
                    "which no preceding assistant message's 'tool_calls' contains.",
                    param=f"{p}.tool_call_id",
                )
    return messages


def _max_tokens(body: dict[str, Any]) -> int | None:
    """`max_completion_tokens` wins over the older `max_tokens`; both must be valid if given."""
    given = {}
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if not _is_int(value) or value < 1:
            raise invalid(f"Invalid '{key}': expected an integer >= 1, got {value!r}.", param=key)
        given[key] = value
    return next(iter(given.values()), None)


def chat_request(body: Any) -> ChatRequest:
    """A validated request; `APIError` naming the offending parameter otherwise."""
    if not isinstance(body, dict):
        raise invalid("Invalid request body: expected a JSON object.")
    model = body.get("model")
    if model is None:
        raise _missing("model")
    if not isinstance(model, str) or not model:
        raise invalid("Invalid 'model': expected a non-empty string.", param="model")
    messages = _check_messages(body.get("messages"))
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise invalid("Invalid 'tools': expected an array of objects.", param="tools")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("Invalid 'stream': expected a boolean.", param="stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid("Invalid 'stream_options': expected an object.", param="stream_options")
    n = body.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise APIError(400, "This scripted provider produces exactly one choice; 'n' must be 1.", param="n")
    return ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        max_tokens=_max_tokens(body),
        stream=stream,
        include_usage=bool(stream and options and options.get("include_usage")),
    )
