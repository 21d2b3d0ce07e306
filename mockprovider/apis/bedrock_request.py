"""A Bedrock Converse request read into the chat conversation it stands for (the mapping is in
`apis/bedrock.py`'s docstring): its blocks checked, each `toolUse` answered by a `toolResult` in
the next message, and its `cachePoint` blocks read as the cache's breakpoints, in Bedrock's words."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mockprovider.apis.shared import ChatShaped, body_object, chat_tool, string, tool_call
from mockprovider.errors import APIError, invalid
from mockprovider.reading.validation import number_in, positive_int
from mockprovider.replies import caching, tool_choice
from mockprovider.replies.tool_choice import AUTO, ToolChoice

BLOCKS = {"user": ("text", "toolResult", "cachePoint"),
          "assistant": ("text", "toolUse", "reasoningContent", "cachePoint")}


def _member(block: Any, p: str, allowed: tuple[str, ...]) -> tuple[str, Any]:
    """A union block's one member, `{"text": ...}` → ("text", ...), if it is one `allowed`."""
    if not (isinstance(block, dict) and len(block) == 1):
        raise invalid(f"{p}: expected an object with exactly one member ({', '.join(allowed)}).", param=p)
    ((kind, value),) = block.items()
    if kind not in allowed:
        raise invalid(f"{p}: the block {kind!r} is not readable here; this mock reads {', '.join(allowed)} "
                      "blocks.", param=p)
    return kind, value


def _object(value: Any, p: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{p}: expected an object.", param=p)
    return value


def _list(value: Any, p: str, *, required: bool = True) -> list[Any]:
    """`value`, an array (a non-empty one if `required`)."""
    if not isinstance(value, list) or (required and not value):
        raise invalid(f"{p}: expected {'a non-empty' if required else 'an'} array.", param=p)
    return value


@dataclass(kw_only=True)
class _Reading:
    """The chat messages so far, and where each `cachePoint` falls among them."""

    tools: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    marks: list[caching.Breakpoint] = field(default_factory=list)

    def mark(self, value: Any, p: str, *, open_text: str | None = None, whole: bool = True) -> None:
        """A cachePoint after the chat messages so far (`open_text`: after this much of the next
        message's text, when `whole` is False because more text follows in it)."""
        point = _object(value, p)
        ttl = point.get("ttl", "5m")
        if point.get("type") != "default" or ttl not in ("5m", "1h"):
            raise invalid(f"{p}: expected {{\"type\": \"default\"}} with an optional ttl of '5m' or '1h'.",
                          param=p)
        if len(self.marks) == caching.MAX_BREAKPOINTS:
            raise invalid(f"{p}: a request may hold at most {caching.MAX_BREAKPOINTS} cachePoint blocks "
                          "(cache checkpoints).", param=p)
        at = len(self.messages) + (open_text is not None)
        self.marks.append(caching.Breakpoint(tools=self.tools, messages=at, ttl=ttl,
                                             text=None if whole else open_text))


def _text(value: Any, p: str) -> str:
    return string(value, f"{p}.text")


def _last_text(blocks: list[Any]) -> int:
    """The index of the last text block (-1: none), so a cachePoint knows if text follows it."""
    return max((j for j, b in enumerate(blocks) if isinstance(b, dict) and "text" in b), default=-1)


def _system(value: Any, reading: _Reading) -> None:
    texts: list[str] = []
    last = _last_text(_list(value, "system", required=False))
    for j, block in enumerate(value):
        kind, inner = _member(block, f"system[{j}]", ("text", "cachePoint"))
        if kind == "text":
            texts.append(_text(inner, f"system[{j}]"))
        else:
            reading.mark(inner, f"system[{j}].cachePoint", open_text="".join(texts) if texts else None,
                         whole=j > last)
    if texts:
        reading.messages.append({"role": "system", "content": "".join(texts)})


def _assistant(blocks: list[Any], p: str, reading: _Reading) -> dict[str, None]:
    """The assistant message; the toolUse ids it asks the next message to answer. A cachePoint in it
    caches the whole message, as a mark on an assistant block does on Anthropic's API."""
    texts, calls, ids, points = [], [], [], []
    for j, block in enumerate(blocks):
        q = f"{p}.content[{j}]"
        kind, inner = _member(block, q, BLOCKS["assistant"])
        if kind == "text":
            texts.append(_text(inner, q))
        elif kind == "toolUse":
            use = _object(inner, f"{q}.toolUse")
            call_id = string(use.get("toolUseId"), f"{q}.toolUse.toolUseId")
            arguments = use.get("input")
            if not isinstance(arguments, dict):
                raise invalid(f"{q}.toolUse.input: expected an object.", param=f"{q}.toolUse.input")
            # Compact and unescaped, as the chat route sends a call's arguments: the same call fed
            # back counts the same tokens in every format.
            calls.append(tool_call(call_id, string(use.get("name"), f"{q}.toolUse.name"),
                                   json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)))
            ids.append(call_id)
        elif kind == "cachePoint":
            points.append((inner, f"{q}.cachePoint"))
        # reasoningContent: earlier reasoning sent back, as Claude asks for it; not part of the prompt
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if not (texts or calls):
        message["content"] = ""
    reading.messages.append(message)
    for inner, q in points:
        reading.mark(inner, q)
    return dict.fromkeys(ids)  # ordered, and each answer found and removed in constant time


def _result_text(result: dict[str, Any], q: str) -> str:
    """A toolResult's content: its text blocks and JSON blocks (as compact JSON), joined."""
    out = []
    for k, part in enumerate(_list(result.get("content"), f"{q}.toolResult.content", required=False)):
        kind, inner = _member(part, f"{q}.toolResult.content[{k}]", ("text", "json"))
        out.append(string(inner, f"{q}.toolResult.content[{k}].text") if kind == "text"
                   else json.dumps(inner, separators=(",", ":"), ensure_ascii=False))
    return "".join(out)


def _user(blocks: list[Any], i: int, expected: dict[str, None], reading: _Reading) -> None:
    """`messages[i]`'s blocks, a user message's: a tool message per toolResult (each answering one
    of `expected`, the previous message's toolUse ids, removed as answered), then one user
    message of its text, if any."""
    p = f"messages[{i}]"
    texts: list[str] = []
    results: list[dict[str, Any]] = []
    pending: list[tuple[Any, str, int, int]] = []  # cachePoints after text: placed after the results
    for j, block in enumerate(blocks):
        q = f"{p}.content[{j}]"
        kind, inner = _member(block, q, BLOCKS["user"])
        if kind == "text":
            texts.append(_text(inner, q))
        elif kind == "cachePoint":
            if texts:
                pending.append((inner, q, len(texts), j))
            else:
                reading.messages.extend(results)
                results = []
                reading.mark(inner, f"{q}.cachePoint")
        else:
            results.append(_tool_result(_object(inner, f"{q}.toolResult"), q, i, expected))
    reading.messages.extend(results)
    last = _last_text(blocks)
    for inner, q, count, j in pending:  # at most MAX_BREAKPOINTS joins: `mark` refuses more
        reading.mark(inner, f"{q}.cachePoint", open_text="".join(texts[:count]), whole=j > last)
    if texts:
        reading.messages.append({"role": "user", "content": "".join(texts)})


def _tool_result(result: dict[str, Any], q: str, i: int, expected: dict[str, None]) -> dict[str, Any]:
    call_id = string(result.get("toolUseId"), f"{q}.toolResult.toolUseId")
    if call_id not in expected:
        raise invalid(
            f"The toolUseId {call_id} in the toolResult block at messages.{i}.content does not match any "
            "toolUse block of the previous turn; each toolResult must answer a toolUse of the assistant "
            "message before it, once.",
            param=f"{q}.toolResult.toolUseId",
        )
    status = result.get("status", "success")
    if status not in ("success", "error"):
        raise invalid(f"{q}.toolResult.status: expected 'success' or 'error', got {status!r}.",
                      param=f"{q}.toolResult.status")
    del expected[call_id]
    return {"role": "tool", "tool_call_id": call_id, "content": _result_text(result, q)}


def _unanswered(i: int, ids: dict[str, None]) -> APIError:
    return invalid(f"Expected toolResult blocks at messages.{i}.content for the following Ids: "
                   f"{', '.join(ids)}", param=f"messages[{i}]")


def _messages(value: Any, reading: _Reading) -> None:
    if not isinstance(value, list) or not value:
        raise invalid("The conversation is empty: 'messages' must hold at least one message, starting "
                      "with a user message.", param="messages")
    expected: dict[str, None] = {}
    previous = None
    for i, message in enumerate(value):
        p = f"messages[{i}]"
        role = _object(message, p).get("role")
        if role not in ("user", "assistant"):  # not `in BLOCKS`: a role may be unhashable
            raise invalid(f"{p}.role: {role!r}; expected 'user' or 'assistant'.", param=f"{p}.role")
        if previous is None and role != "user":
            raise invalid("A conversation must start with a user message. Try again with a conversation "
                          "that starts with a user message.", param=f"{p}.role")
        if role == previous:
            raise invalid("A conversation must alternate between user and assistant roles. Make sure the "
                          "conversation alternates between user and assistant roles and try again.",
                          param=f"{p}.role")
        previous = role
        blocks = _list(message.get("content"), f"{p}.content")
        if role == "assistant":
            expected = _assistant(blocks, p, reading)
            continue
        _user(blocks, i, expected, reading)
        if expected:
            raise _unanswered(i, expected)
    if expected:
        raise _unanswered(len(value), expected)


def _tools(config: dict[str, Any], reading: _Reading) -> list[dict[str, Any]]:
    tools = []
    for i, tool in enumerate(_list(config.get("tools"), "toolConfig.tools")):
        p = f"toolConfig.tools[{i}]"
        kind, inner = _member(tool, p, ("toolSpec", "cachePoint"))
        if kind == "cachePoint":
            reading.tools = len(tools)
            reading.mark(inner, f"{p}.cachePoint")
            continue
        spec = _object(inner, f"{p}.toolSpec")
        schema = _object(spec.get("inputSchema"), f"{p}.toolSpec.inputSchema")
        if not isinstance(schema.get("json"), dict):
            raise invalid(f"{p}.toolSpec.inputSchema.json: expected a JSON schema object.",
                          param=f"{p}.toolSpec.inputSchema")
        tools.append(chat_tool(spec.get("name"), spec.get("description"), schema["json"], f"{p}.toolSpec"))
    reading.tools = len(tools)
    return tools


def _choice(value: Any) -> ToolChoice:
    """toolChoice: {"auto": {}} | {"any": {}} | {"tool": {"name"}}."""
    if value is None:
        return AUTO
    kind, inner = _member(value, "toolConfig.toolChoice", ("auto", "any", "tool"))
    if kind == "auto":
        return AUTO
    if kind == "any":
        return ToolChoice("required")
    return ToolChoice("function", string(_object(inner, "toolConfig.toolChoice.tool").get("name"),
                                         "toolConfig.toolChoice.tool.name"))


def _max_tokens(value: Any) -> int | None:
    if value is None:
        return None
    config = _object(value, "inferenceConfig")
    for key in ("temperature", "topP"):
        if key in config:
            number_in(config, key, 0, 1)
    return positive_int(config, "maxTokens")


def converse_request(raw: Any, *, model: str, stream: bool) -> ChatShaped:
    """A validated Converse request in chat shape; `APIError` naming the offending field otherwise."""
    body = body_object(raw)
    reading = _Reading()
    tools: list[dict[str, Any]] = []
    choice = AUTO
    if (config := body.get("toolConfig")) is not None:
        config = _object(config, "toolConfig")
        tools = _tools(config, reading)
        choice = _choice(config.get("toolChoice"))
        tool_choice.check(choice, tools)
    if (system := body.get("system")) is not None:
        _system(system, reading)
    _messages(body.get("messages"), reading)
    return ChatShaped(
        model=model,
        messages=reading.messages,
        tools=tools,
        max_tokens=_max_tokens(body.get("inferenceConfig")),
        stream=stream,
        cache_breakpoints=tuple(reading.marks),
        tool_choice=choice,
    )
