"""A Chat Completions request checked: every field the route reads, each refused as OpenAI refuses
it (`chat.py` answers it). Its messages come read and counted (`reading.body.read_chat`)."""

from __future__ import annotations

from itertools import repeat
from typing import Any, NamedTuple

from mockprovider.errors import APIError, invalid, missing
from mockprovider.reading import settings
from mockprovider.reading.transcript import Transcript
from mockprovider.reading.validation import flag, is_int, positive_int
from mockprovider.replies import tool_choice
from mockprovider.replies.tool_choice import AUTO, ToolChoice


class ChatRequest(NamedTuple):
    """A checked chat request (a NamedTuple for speed: see `replies/completions.Completion`; results/bench.md,
    speed tricks: "ChatRequest a NamedTuple")."""

    model: str
    transcript: Transcript
    """The messages checked and (most of them) counted, with their turn and tool text."""
    tools: list[dict[str, Any]] | None
    tool_choice: ToolChoice
    max_tokens: int | None
    stream: bool
    include_usage: bool


def _max_tokens(body: dict[str, Any]) -> int | None:
    """`max_completion_tokens` wins over the older `max_tokens`; both must be valid if given."""
    newer, older = positive_int(body, "max_completion_tokens"), positive_int(body, "max_tokens")
    return newer if newer is not None else older


def check_tools(tools: list[dict[str, Any]]) -> None:
    """A 400 unless every function tool is one the real API takes: a `function` object whose
    `parameters`, if any, are an object (other tool types are left to the checks downstream).
    One loop, no call per tool: it runs on every request that offers tools."""
    for i, tool in enumerate(tools):
        if tool.get("type") != "function":
            continue
        function = tool.get("function")
        if type(function) is dict:
            parameters = function.get("parameters")
            if parameters is None or type(parameters) is dict:
                continue
            raise invalid(f"Invalid type for 'tools[{i}].function.parameters': expected an object.",
                          param=f"tools[{i}].function.parameters", code="invalid_type")
        if function is None:
            raise missing(f"tools[{i}].function")
        raise invalid(f"Invalid type for 'tools[{i}].function': expected an object.",
                      param=f"tools[{i}].function", code="invalid_type")


_PLAIN = frozenset(("model", "messages", "tools"))


def chat_request(body: Any, messages: Transcript | APIError, deployment: str | None = None) -> ChatRequest:
    """A validated request; `APIError` naming the offending parameter otherwise.

    `messages` is `body["messages"]` as `reading.body.read_chat` read them, or why they could not
    be, raised after `model`'s check; `deployment`, an Azure deployment's name, stands for the
    model whatever the body says.
    """
    if not isinstance(body, dict):
        raise invalid("Invalid request body: expected a JSON object.")
    model = body.get("model") if deployment is None else deployment
    if model is None:
        raise missing("model")
    if not isinstance(model, str) or not model:
        raise invalid("Invalid 'model': expected a non-empty string.", param="model")
    if isinstance(messages, APIError):
        raise messages
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(map(isinstance, tools, repeat(dict)))):
        raise invalid("Invalid 'tools': expected an array of objects.", param="tools")
    if tools:
        check_tools(tools)
    if body.keys() <= _PLAIN:  # an agent loop's usual body: none of the optional fields to check
        return ChatRequest(model, messages, tools, AUTO, None, False, False)
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
    if options is not None and not stream:
        raise invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                      param="stream_options")
    if not settings.CHAT.keys().isdisjoint(body):  # most bodies carry none: no call into reading/
        settings.check(body, settings.CHAT)
    form = body.get("response_format")
    if form is not None and form.get("type") == "json_schema":
        if not isinstance(form.get("json_schema"), dict):
            raise missing("response_format.json_schema")
    n = body.get("n")
    if n is not None and (not is_int(n) or n != 1):
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
