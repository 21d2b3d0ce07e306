"""A Gemini `generateContent` request read into the chat shape the shared steps understand.

- `systemInstruction` (text parts)     → a system message first
- a `user` content                     → a tool message per `functionResponse` part, then a user
                                         message of its text parts, if any
- a `model` content                    → an assistant message of its text, with a tool call per
                                         `functionCall` part (`args` as compact JSON arguments)
- `tools[].functionDeclarations`       → chat function definitions

A `functionResponse` answers the `functionCall` with its `id`; without one (google-genai's
automatic function calling sends none), the earliest unanswered call of its `name` (`pairing`).
One that answers nothing is a 400, as in every format, and so is a function call turn whose next
content does not hold one functionResponse per call (Gemini's own 400). A call sent back without
an id is named `call_{turn}_{index}`. A response object holding a single string
(`{"result": "…"}`, as automatic function calling wraps a function's return) is that string as
the tool's text; any other object is its compact JSON. Field names are read in lowerCamelCase
and, as Google's JSON parser also accepts, in snake_case; `contents` and `parts` may be sent as
their one element.
"""

from __future__ import annotations

import json
from typing import Any

from mockprovider.apis.shared import ChatShaped, body_object, chat_tool, string, tool_call
from mockprovider.errors import invalid, missing
from mockprovider.reading import settings
from mockprovider.reading.pairing import Calls
from mockprovider.replies import tool_choice

ROLES = ("user", "model")
INT32_MAX = 2**31 - 1
"""The largest `maxOutputTokens`: Google's parser refuses a TYPE_INT32 field past it."""
DATA = ("text", "functionCall", "functionResponse")
"""The part kinds this mock reads; a part holds exactly one."""
OTHER_DATA = ("inlineData", "fileData", "executableCode", "codeExecutionResult")
_SNAKE: dict[str, str] = {
    "systemInstruction": "system_instruction",
    "generationConfig": "generation_config",
    "functionDeclarations": "function_declarations",
    "functionCall": "function_call",
    "functionResponse": "function_response",
    "maxOutputTokens": "max_output_tokens",
    "candidateCount": "candidate_count",
    "toolConfig": "tool_config",
    "parametersJsonSchema": "parameters_json_schema",
    "inlineData": "inline_data",
    "fileData": "file_data",
    "executableCode": "executable_code",
    "codeExecutionResult": "code_execution_result",
}


_KIND = {spelling: kind for kind in DATA for spelling in (kind, _SNAKE.get(kind, kind))}
"""Each spelling of a part kind this mock reads, to the kind."""
_OTHER = {spelling for kind in OTHER_DATA for spelling in (kind, _SNAKE.get(kind, kind))}


def field(obj: dict[str, Any], name: str) -> Any:
    """`obj[name]`, or the same field under its snake_case name."""
    value = obj.get(name)
    if value is None and name in _SNAKE:
        return obj.get(_SNAKE[name])
    return value


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"Invalid value at '{param}': expected an object.", param=param)
    return value


def _parts(content: dict[str, Any], p: str) -> list[tuple[str, Any, str]]:
    """The content's parts as (kind, value, parameter name)."""
    parts = content.get("parts")
    if isinstance(parts, dict):  # a repeated field sent as its one element, as Google's parser reads it
        parts = [parts]
    if not isinstance(parts, list) or not parts:
        q = f"{p}.parts"
        raise invalid(f"Invalid value at '{q}': expected a non-empty array of parts.", param=q)
    out = []
    for j, part in enumerate(parts):
        q = f"{p}.parts[{j}]"
        part = _object(part, q)
        # The part's own keys looked up, not every kind's two spellings: a body holds 100,000s of parts.
        kinds = list(dict.fromkeys(_KIND[key] for key, value in part.items()
                                   if key in _KIND and value is not None))
        if any(key in _OTHER and value is not None for key, value in part.items()):
            raise invalid(f"Invalid value at '{q}': this mock reads {', '.join(DATA)} parts only.", param=q)
        if len(kinds) != 1:
            raise invalid(
                f"Invalid value at '{q}': a part holds exactly one of {', '.join(DATA)}; "
                f"this one holds {len(kinds)}.",
                param=q,
            )
        out.append((kinds[0], field(part, kinds[0]), f"{q}.{kinds[0]}"))
    return out


def system_text(value: Any) -> str:
    """`systemInstruction`'s text parts, joined."""
    content = _object(value, "systemInstruction")
    texts = []
    for kind, text, q in _parts(content, "systemInstruction"):
        if kind != "text":
            raise invalid(f"Invalid value at '{q}': systemInstruction holds text parts only.", param=q)
        texts.append(string(text, q))
    return "".join(texts)


def _arguments(call: Any, q: str) -> str:
    args = _object(call, q).get("args")
    if args is None or args == {}:
        return "{}"
    # Compact and unescaped, as the chat route sends a call's arguments, so the same call fed
    # back counts the same tokens in every format.
    return json.dumps(_object(args, f"{q}.args"), separators=(",", ":"), ensure_ascii=False)


def response_text(response: Any, q: str) -> str:
    """What a tool said, from a functionResponse's `response` object."""
    response = _object(response, q)
    if len(response) == 1:
        (value,) = response.values()
        if isinstance(value, str):
            return value
    return json.dumps(response, separators=(",", ":"), ensure_ascii=False)


def _model(parts: list[tuple[str, Any, str]], turn: int, calls: Calls) -> dict[str, Any]:
    texts, tool_calls = [], []
    for kind, value, q in parts:
        if kind == "text":
            texts.append(string(value, q))
        elif kind == "functionCall":
            call = _object(value, q)
            name = string(call.get("name"), f"{q}.name")
            call_id = call.get("id")
            call_id = f"call_{turn}_{len(tool_calls)}" if call_id is None else string(call_id, f"{q}.id")
            tool_calls.append(tool_call(call_id, name, _arguments(call, q)))
            calls.add(call_id, name)
        else:
            raise invalid(f"Invalid value at '{q}': a model content holds text and functionCall parts.",
                          param=q)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _user(parts: list[tuple[str, Any, str]], calls: Calls) -> list[dict[str, Any]]:
    results, texts = [], []
    for kind, value, q in parts:
        if kind == "text":
            texts.append(string(value, q))
        elif kind == "functionResponse":
            reply = _object(value, q)
            name, call_id = string(reply.get("name"), f"{q}.name"), reply.get("id")
            call_id = calls.answer(None if call_id is None else string(call_id, f"{q}.id"), name, q)
            results.append({"role": "tool", "tool_call_id": call_id,
                            "content": response_text(reply.get("response"), f"{q}.response")})
        else:
            raise invalid(f"Invalid value at '{q}': a user content holds text and functionResponse parts.",
                          param=q)
    return results + ([{"role": "user", "content": "".join(texts)}] if texts else [])


def contents_messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise missing("contents")
    if isinstance(value, dict):  # a repeated field sent as its one element, as Google's parser reads it
        value = [value]
    if not isinstance(value, list) or not value:
        raise invalid("Invalid value at 'contents': expected a non-empty array of contents.",
                      param="contents")
    out: list[dict[str, Any]] = []
    calls, turn = Calls(result="functionResponse", call="functionCall part"), 0
    # The last function call turn's functionCall parts, and the functionResponse parts of the
    # user contents since (one turn, however many contents it is sent in).
    calling, answering, answered_at = 0, 0, None
    for i, content in enumerate(value):
        p = f"contents[{i}]"
        content = _object(content, p)
        role = content.get("role", "user")
        if role not in ROLES:  # not `in` a set: a role may be unhashable
            raise invalid(f"Invalid value at '{p}.role': {role!r}; expected 'user' or 'model'.",
                          param=f"{p}.role")
        parts = _parts(content, p)
        if role == "user":
            if not calling:
                _check_follows_a_call(parts)
            answering += sum(kind == "functionResponse" for kind, _, _ in parts)
            answered_at = answered_at or p
        elif calling or answering:
            _check_answered(calling, answering, answered_at or p)
        if role == "model":
            calling, answering, answered_at = sum(kind == "functionCall" for kind, _, _ in parts), 0, None
            out.append(_model(parts, turn, calls))
            turn += 1
        else:
            out.extend(_user(parts, calls))
    if answered_at is not None:  # a call turn last of all is not answered yet: the model continues it
        _check_answered(calling, answering, answered_at)
    return out


def _check_follows_a_call(parts: list[tuple[str, Any, str]]) -> None:
    """Gemini's 400 for a functionResponse part in a user turn that follows no function call turn."""
    for kind, value, q in parts:
        if kind == "functionResponse":
            name = value.get("name") if isinstance(value, dict) else None
            raise invalid("Please ensure that function response turn comes immediately after a function call "
                          f"turn. (Invalid value at '{q}': the functionResponse of {name!r} follows no "
                          "functionCall part.)", param=q)


def _check_answered(calls: int, responses: int, p: str) -> None:
    """Gemini's 400 when the user turn after a function call turn does not hold one
    functionResponse part per functionCall part (a call left unanswered, or answered twice)."""
    if responses != calls:
        raise invalid("Please ensure that the number of function response parts is equal to the number "
                      "of function call parts of the function call turn.", param=p)


def tools_of(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("Invalid value at 'tools': expected an array of tools.", param="tools")
    tools = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        declarations = field(_object(tool, p), "functionDeclarations")
        if not isinstance(declarations, list):
            raise invalid(f"Invalid value at '{p}': this mock serves functionDeclarations tools only.",
                          param=p)
        for k, declaration in enumerate(declarations):
            q = f"{p}.functionDeclarations[{k}]"
            declaration = _object(declaration, q)
            schema = field(declaration, "parameters")
            if schema is None:
                schema = field(declaration, "parametersJsonSchema")
            tools.append(chat_tool(declaration.get("name"), declaration.get("description"), schema, q))
    return tools


def _max_output_tokens(body: dict[str, Any]) -> int | None:
    config = field(body, "generationConfig")
    if config is None:
        return None
    config = _object(config, "generationConfig")
    settings.GENERATION_CONFIG(config, "generationConfig")
    count = field(config, "candidateCount")
    if count is not None and (count != 1 or isinstance(count, bool)):  # True == 1 in Python
        raise invalid("Invalid value at 'generationConfig.candidateCount': this scripted provider "
                      "produces exactly one candidate.", param="generationConfig.candidateCount")
    value = field(config, "maxOutputTokens")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= INT32_MAX:
        p = "generationConfig.maxOutputTokens"
        raise invalid(f"Invalid value at '{p}' (TYPE_INT32): expected an integer >= 1, got {value!r}.",
                      param=p)
    return value


def generate_request(raw: Any, *, model: str, stream: bool) -> ChatShaped:
    """A validated request in chat shape; `APIError` naming the offending field otherwise."""
    body = body_object(raw)
    system = field(body, "systemInstruction")
    messages = [] if system is None else [{"role": "system", "content": system_text(system)}]
    tools = tools_of(body.get("tools"))
    choice = tool_choice.gemini_choice(field(body, "toolConfig"))
    tool_choice.check(choice, tools)
    return ChatShaped(
        model=model,
        messages=messages + contents_messages(body.get("contents")),
        tools=tools,
        max_tokens=_max_output_tokens(body),
        stream=stream,
        tool_choice=choice,
        paired=True,  # `pairing` matched the results, which may leave calls unanswered
    )
