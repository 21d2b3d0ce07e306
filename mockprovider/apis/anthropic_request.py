"""An Anthropic Messages request read into the chat conversation it stands for (the mapping is in
`apis/anthropic.py`'s docstring): its blocks checked, each `tool_use` answered by a `tool_result`
in the next message, in Anthropic's own words."""

from __future__ import annotations

import json
from typing import Any

from mockprovider.apis.shared import ChatShaped, body_object, chat_tool, model_of, string, tool_call
from mockprovider.errors import APIError, invalid, missing
from mockprovider.reading import settings
from mockprovider.reading.validation import flag, is_int, positive_int
from mockprovider.replies import caching, tool_choice

INTERLEAVED = "interleaved-thinking-"
"""The `anthropic-beta` under which a thinking budget may exceed `max_tokens`."""
BLOCKS = {"user": ("text", "tool_result"), "assistant": ("text", "tool_use", "thinking", "redacted_thinking")}


def _text_blocks(value: Any, param: str) -> str:
    """A string, or an array of text blocks, as one string."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise invalid(f"{param}: expected a string or an array of text blocks.", param=param)
    texts = []
    for j, block in enumerate(value):
        if not (isinstance(block, dict) and block.get("type") == "text"):
            raise invalid(f"{param}[{j}]: this mock reads text blocks only.", param=f"{param}[{j}]")
        texts.append(string(block.get("text"), f"{param}[{j}].text"))
    return "".join(texts)


def _blocks(message: dict[str, Any], p: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise invalid(f"{p}.content: expected a string or a non-empty array of blocks.", param=f"{p}.content")
    allowed = BLOCKS[message["role"]]
    for j, block in enumerate(content):
        if not (isinstance(block, dict) and block.get("type") in allowed):
            kind = block.get("type") if isinstance(block, dict) else block
            raise invalid(
                f"{p}.content[{j}]: block type {kind!r} is not readable here; a {message['role']} "
                f"message may hold {' and '.join(allowed)} blocks.",
                param=f"{p}.content[{j}]",
            )
    return content


def _assistant(blocks: list[dict[str, Any]], p: str, seen: list[str]) -> dict[str, Any]:
    texts, calls = [], []
    for j, block in enumerate(blocks):
        q = f"{p}.content[{j}]"
        if block["type"] == "text":
            texts.append(string(block.get("text"), f"{q}.text"))
            continue
        if block["type"] in ("thinking", "redacted_thinking"):
            continue  # earlier thinking, sent back as the API asks: not part of the prompt here
        call_id = string(block.get("id"), f"{q}.id")
        arguments = block.get("input")
        if not isinstance(arguments, dict):
            raise invalid(f"{q}.input: expected an object.", param=f"{q}.input")
        # Compact and unescaped, as the chat route sends a call's arguments, so the same call
        # fed back counts the same tokens in both formats.
        calls.append(tool_call(call_id, string(block.get("name"), f"{q}.name"),
                               json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)))
        seen.append(call_id)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user(blocks: list[dict[str, Any]], i: int, expected: list[str]) -> list[dict[str, Any]]:
    """`messages[i]`'s blocks, a user message's; its tool_result blocks answer `expected`, the
    tool_use ids of the message before it, each once (removed from `expected` as they are
    answered), and come before its text: a result after text does not follow its call
    immediately, and the real API refuses it as unanswered (docs/conformance.md)."""
    results, texts, answered = [], [], set()
    p = f"messages[{i}]"
    dotted = p.replace("[", ".").replace("]", "")  # Anthropic writes paths as messages.3.content.0
    for j, block in enumerate(blocks):
        q = f"{p}.content[{j}]"
        if block["type"] == "text":
            texts.append(string(block.get("text"), f"{q}.text"))
            continue
        if texts and expected:
            raise _unanswered(i - 1, expected)
        call_id = string(block.get("tool_use_id"), f"{q}.tool_use_id")
        if call_id in answered:
            raise invalid(
                f"{dotted}.content.{j}: each tool_use must have a single result. Found multiple "
                f"`tool_result` blocks with id: {call_id}",
                param=f"{q}.tool_use_id",
            )
        if call_id not in expected:
            raise invalid(
                f"{dotted}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. "
                "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
                "message.",
                param=f"{q}.tool_use_id",
            )
        expected.remove(call_id)
        answered.add(call_id)
        output = block.get("content")
        text = "" if output is None else _text_blocks(output, f"{q}.content")
        results.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return results + ([{"role": "user", "content": "".join(texts)}] if texts else [])


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise missing("messages")
    if not isinstance(value, list) or not value:
        raise invalid("messages: expected a non-empty array of messages.", param="messages")
    out: list[dict[str, Any]] = []
    expected: list[str] = []  # the previous assistant message's tool_use ids, until answered
    for i, message in enumerate(value):
        p = f"messages[{i}]"
        if not isinstance(message, dict):
            raise invalid(f"{p}: expected an object.", param=p)
        role = message.get("role")
        if role not in ("user", "assistant"):  # not `in BLOCKS`: a role may be unhashable
            raise invalid(f"{p}.role: {role!r}; expected 'user' or 'assistant'.", param=f"{p}.role")
        blocks = _blocks(message, p)
        if message["role"] == "assistant":
            if expected:
                raise _unanswered(i - 1, expected)
            out.append(_assistant(blocks, p, expected))
        else:
            out.extend(_user(blocks, i, expected))
            if expected:
                raise _unanswered(i - 1, expected)
    if expected:
        raise _unanswered(len(value) - 1, expected)
    return out


def _unanswered(i: int, ids: list[str]) -> APIError:
    """Anthropic's own wording (docs/conformance.md cites where it was seen)."""
    return invalid(
        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
        "message.",
        param=f"messages[{i}]",
    )


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("tools: expected an array of objects.", param="tools")
    tools = []
    for i, tool in enumerate(value):
        p = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            raise invalid(f"{p}: this mock serves client tools only (name, input_schema).", param=p)
        if not isinstance(tool.get("input_schema"), dict):
            raise invalid(f"{p}.input_schema: expected an object.", param=f"{p}.input_schema")
        tools.append(chat_tool(tool.get("name"), tool.get("description"), tool["input_schema"], p))
    return tools


def _check_settings(body: dict[str, Any], max_tokens: int | None, interleaved: bool) -> None:
    """The optional settings Anthropic checks and this mock otherwise ignores (`settings.MESSAGES`,
    in Anthropic's words where it has its own), each looked at only when present. `interleaved`:
    the thinking budget is the whole turn's (across its thinking blocks) and may pass max_tokens."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if budget is None:
            raise invalid("thinking.enabled.budget_tokens: Field required", param="thinking.budget_tokens")
        if not is_int(budget):
            raise invalid("thinking.enabled.budget_tokens: Input should be a valid integer",
                          param="thinking.budget_tokens")
        if max_tokens is not None and budget >= max_tokens and not interleaved:
            raise invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                          "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
                          "#max-tokens-and-context-window-size", param="max_tokens")
    settings.check(body, settings.MESSAGES)


def messages_request(raw: Any, *, counting: bool = False, betas: str = "") -> ChatShaped:
    """A validated request in chat shape; `APIError` naming the offending field otherwise.
    `counting`: a count_tokens request, which has no `max_tokens`; `betas`: its `anthropic-beta` header."""
    body = body_object(raw)
    model = model_of(body)
    if counting and "max_tokens" in body:  # count_tokens takes no more than it counts
        raise invalid("max_tokens: Extra inputs are not permitted", param="max_tokens")
    max_tokens = None if counting else positive_int(body, "max_tokens")
    if max_tokens is None and not counting:
        raise missing("max_tokens")
    _check_settings(body, max_tokens, INTERLEAVED in betas)
    system = body.get("system")
    messages = [] if system is None else [{"role": "system", "content": _text_blocks(system, "system")}]
    tools = _tools(body.get("tools"))
    choice = tool_choice.messages_choice(body.get("tool_choice"))
    tool_choice.check(choice, tools)
    return ChatShaped(
        model=model,
        messages=messages + _messages(body.get("messages")),
        tools=tools,
        max_tokens=max_tokens,
        stream=flag(body, "stream"),
        cache_breakpoints=caching.breakpoints(body),
        tool_choice=choice,
    )
