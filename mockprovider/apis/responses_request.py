"""A Responses API request read into the chat conversation it stands for (the mapping is in
`apis/responses.py`'s docstring): its items checked, each `function_call_output` answering a call,
and what would need a stored response refused, in the API's own words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mockprovider.apis.shared import ChatShaped, body_object, chat_tool, model_of, string, tool_call
from mockprovider.errors import APIError, invalid, missing
from mockprovider.reading import settings
from mockprovider.reading.validation import flag, positive_int
from mockprovider.replies import tool_choice

ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text")
ITEMS = ("message", "function_call", "function_call_output", "reasoning")


def _stateless(param: str) -> APIError:
    return invalid(
        f"'{param}' needs a server that remembers earlier responses, and this mock is stateless: "
        "send the whole conversation in 'input' instead (earlier output items included).",
        param=param,
        code="stateless",
    )


@dataclass(frozen=True, kw_only=True)
class ResponsesRequest:
    chat: ChatShaped
    instructions: str | None
    tools: list[dict[str, Any]]
    """As the client sent them; the response echoes them."""
    tool_choice: Any
    """As the client sent it ("auto" when it sent none); the response echoes it."""


def _text(content: Any, param: str) -> str:
    """A string, or an array of text parts, as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(f"Invalid type for '{param}': expected a string or an array of parts.", param=param)
    texts = []
    for j, part in enumerate(content):
        p = f"{param}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "refusal":
            texts.append(string(part.get("refusal"), f"{p}.refusal"))
        elif kind in TEXT_PARTS:
            texts.append(string(part.get("text"), f"{p}.text"))
        else:
            raise invalid(
                f"Invalid '{p}': this mock reads text parts only ({', '.join(TEXT_PARTS)}, refusal).", param=p
            )
    return "".join(texts)


def _message(item: dict[str, Any], p: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in ROLES:
        raise invalid(
            f"Invalid value for '{p}.role': {role!r}. Supported values are: {', '.join(ROLES)}.",
            param=f"{p}.role",
            code="invalid_value",
        )
    return {"role": role, "content": _text(item.get("content"), f"{p}.content")}


def _input_messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise missing("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise invalid("Invalid 'input': expected a string or a non-empty array of items.", param="input")
    messages: list[dict[str, Any]] = []
    calls: set[str] = set()
    unanswered: dict[str, int] = {}  # call_id -> its item's index, until an output answers it
    for i, item in enumerate(value):
        p = f"input[{i}]"
        if not isinstance(item, dict):
            raise invalid(f"Invalid type for '{p}': expected an object.", param=p)
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(_message(item, p))
        elif kind == "function_call":
            call_id = string(item.get("call_id"), f"{p}.call_id")
            name = string(item.get("name"), f"{p}.name")
            call = tool_call(call_id, name, string(item.get("arguments"), f"{p}.arguments"))
            if not (messages and messages[-1]["role"] == "assistant"):
                messages.append({"role": "assistant", "content": None})
            messages[-1].setdefault("tool_calls", []).append(call)
            calls.add(call_id)
            unanswered[call_id] = i
        elif kind == "function_call_output":
            call_id = string(item.get("call_id"), f"{p}.call_id")
            if unanswered.pop(call_id, None) is None:
                raise _duplicate_output(call_id, p) if call_id in calls else _orphan_output(call_id)
            output = _text(item.get("output"), f"{p}.output")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif kind == "reasoning":
            continue  # earlier reasoning, sent back as the API asks: not part of the prompt here
        elif kind == "item_reference":
            raise _stateless(f"{p}.id")
        else:
            raise invalid(
                f"Invalid '{p}.type': {kind!r}; this mock reads {', '.join(ITEMS)} items.", param=f"{p}.type"
            )
    if unanswered:
        raise invalid(f"No tool output found for function call {next(iter(unanswered))}.", param="input")
    return messages


# The real API's wording and `param` (docs/conformance.md cites where each was seen).


def _orphan_output(call_id: str) -> APIError:
    return invalid(f"No tool call found for function call output with call_id {call_id}.", param="input")


def _duplicate_output(call_id: str, p: str) -> APIError:
    return invalid(
        f"Duplicate function call output for call_id {call_id}: '{p}' answers a function call that an "
        "earlier function_call_output item already answered.",
        param="input",
    )


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("Invalid 'tools': expected an array of objects.", param="tools")
    tools = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise invalid(f"Invalid '{p}': this mock serves function tools only.", param=p)
        name, description, schema = tool.get("name"), tool.get("description"), tool.get("parameters")
        tools.append(chat_tool(name, description, schema, p, strict=tool.get("strict")))
    return tools


MIN_OUTPUT_TOKENS = 16
"""The spec's minimum for `max_output_tokens`; the real API answers 400 below it."""


def _max_output_tokens(body: dict[str, Any]) -> int | None:
    value = body.get("max_output_tokens")
    # Any integer below the minimum, 0 and negatives included, is refused in the API's words.
    if isinstance(value, int) and not isinstance(value, bool) and value < MIN_OUTPUT_TOKENS:
        raise invalid(
            f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
            f"{MIN_OUTPUT_TOKENS}, but got {value} instead.",
            param="max_output_tokens",
            code="integer_below_min_value",
        )
    return positive_int(body, "max_output_tokens")


def _check_settings(body: dict[str, Any]) -> None:
    """The optional settings the real API checks and this mock otherwise ignores (`settings.RESPONSES`)
    and a `text.format` json_schema's `schema`."""
    settings.check(body, settings.RESPONSES)
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        if form.get("schema") is None:
            raise missing("text.format.schema")
        if not isinstance(form["schema"], dict):
            raise invalid("Invalid type for 'text.format.schema': expected an object.",
                          param="text.format.schema", code="invalid_type")


def responses_request(raw: Any) -> ResponsesRequest:
    """A validated request; `APIError` naming the offending parameter otherwise."""
    body = body_object(raw)
    model = model_of(body)
    for key in ("previous_response_id", "conversation"):
        if body.get(key) is not None:
            raise _stateless(key)
    for key in ("store", "background"):
        if flag(body, key):
            raise _stateless(key)
    instructions = body.get("instructions")
    messages = []
    if instructions is not None:
        messages.append({"role": "system", "content": string(instructions, "instructions")})
    messages += _input_messages(body.get("input"))
    if not messages:
        raise invalid(
            "Invalid 'input': it holds reasoning items only, which are not part of the prompt here; "
            "send the messages and function calls they belong to.",
            param="input",
        )
    tools = _tools(body.get("tools"))
    _check_settings(body)
    choice = tool_choice.responses_choice(body.get("tool_choice"))
    tool_choice.check(choice, tools)
    chat = ChatShaped(
        model=model,
        messages=messages,
        tools=tools,
        max_tokens=_max_output_tokens(body),
        stream=flag(body, "stream"),
        tool_choice=choice,
        paired=True,  # an output may come anywhere after its call
    )
    return ResponsesRequest(
        chat=chat, instructions=instructions, tools=[_echoed(t) for t in body.get("tools") or []],
        tool_choice=body.get("tool_choice") or "auto",
    )


def _echoed(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the Response object echoes it: a function tool always carries `parameters` and
    `strict` (the spec's FunctionTool requires both; the API's default for `strict` is true)."""
    if tool.get("type") != "function":
        return tool
    return {**tool, "parameters": tool.get("parameters"), "strict": tool.get("strict", True)}
