"""What a request allows the reply to be: the tools it declares and its `tool_choice`.

A real model cannot call a tool the request does not offer, nor ignore `tool_choice`. So a
scripted reply is held to the same rules (`constrain`), in every wire format:

- no tools offered, or `tool_choice` "none": a scripted tool call is answered with text instead,
  the scenario's own `fallback` text if it has one, else the reply's text before its calls,
  otherwise `FALLBACK_TEXT`;
- `tool_choice` "required" (Anthropic: "any", Gemini: mode ANY): a scripted text turn is a
  `script_mismatch` error;
- Gemini's allowedFunctionNames (mode ANY or VALIDATED): a call of a function it leaves out is a
  `script_mismatch` error;
- a named function (Anthropic: "tool", Gemini: ANY with one allowed name): a turn that does not
  call exactly that function is a
  `script_mismatch` error; a name the request does not declare is the API's own 400;
- a scripted call of a tool the request does not declare is served as it is (testing how an
  agent meets a hallucinated tool name is a feature), unless the option
  `undeclared_tools=refuse` is set, which makes it a `script_mismatch` error.

`script_mismatch` is a 400: the script and the agent disagree, and the test author should see
it at once, naming the turn and the constraint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, NamedTuple

from mockprovider.errors import APIError, invalid
from mockprovider.scripts.scenarios import Reply, Scenario

FALLBACK_TEXT = "No tool can be called in this turn, so this is a plain text reply."
"""What a scripted tool-call turn becomes when no tool may be called and the scenario has no
`fallback` of its own."""

Mode = Literal["auto", "none", "required", "function"]


class ToolChoice(NamedTuple):
    mode: Mode
    name: str | None = None
    """The function `mode == "function"` names."""
    allowed: tuple[str, ...] = ()
    """The functions a call may name (Gemini's allowedFunctionNames, under ANY or VALIDATED); empty: any."""


AUTO = ToolChoice("auto")
_MODES = {"auto": AUTO, "none": ToolChoice("none"), "required": ToolChoice("required")}


# --- reading each format's tool_choice --------------------------------------------------------


def _bad(expected: str, value: Any) -> APIError:
    return invalid(
        f"Invalid value for 'tool_choice': expected {expected}, got {value!r}.", param="tool_choice"
    )


def chat_choice(value: Any) -> ToolChoice:
    """Chat Completions: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}."""
    if value is None:
        return AUTO
    if isinstance(value, str) and value in _MODES:
        return _MODES[value]
    function = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return ToolChoice("function", function["name"])
    raise _bad('"none", "auto", "required" or {"type": "function", "function": {"name": ...}}', value)


def responses_choice(value: Any) -> ToolChoice:
    """Responses: "none" | "auto" | "required" | {"type": "function", "name"}."""
    if value is None:
        return AUTO
    if isinstance(value, str) and value in _MODES:
        return _MODES[value]
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("name"), str):
        return ToolChoice("function", value["name"])
    raise _bad('"none", "auto", "required" or {"type": "function", "name": ...} (function tools only)', value)


_ANTHROPIC = {"auto": AUTO, "none": ToolChoice("none"), "any": ToolChoice("required")}


def messages_choice(value: Any) -> ToolChoice:
    """Anthropic Messages: {"type": "auto" | "any" | "none"} or {"type": "tool", "name"}."""
    if value is None:
        return AUTO
    kind = value.get("type") if isinstance(value, dict) else None
    if isinstance(kind, str) and kind in _ANTHROPIC:
        return _ANTHROPIC[kind]
    if kind == "tool" and isinstance(value.get("name"), str):
        return ToolChoice("function", value["name"])
    raise invalid(
        "tool_choice: expected an object with type 'auto', 'any', 'none', or 'tool' with a name; "
        f"got {value!r}.",
        param="tool_choice",
    )


def _either(obj: dict[str, Any], camel: str, snake: str) -> Any:
    return obj.get(camel) if obj.get(camel) is not None else obj.get(snake)


def gemini_choice(value: Any) -> ToolChoice:
    """Gemini: `toolConfig.functionCallingConfig` {"mode": "AUTO" | "ANY" | "NONE" | "VALIDATED",
    "allowedFunctionNames"}; ANY with one allowed name is that function, with several any tool."""
    bad = invalid(
        "Invalid value at 'toolConfig.functionCallingConfig': expected a mode of AUTO, ANY, NONE or "
        f"VALIDATED and a list of allowedFunctionNames; got {value!r}.",
        param="toolConfig",
    )
    if value is not None and not isinstance(value, dict):
        raise bad
    config = None if value is None else _either(value, "functionCallingConfig", "function_calling_config")
    if config is None:
        return AUTO
    if not isinstance(config, dict):
        raise bad
    mode = config.get("mode", "AUTO")
    mode = mode.upper() if isinstance(mode, str) else mode  # Google's parser reads enum names in any case
    names = _either(config, "allowedFunctionNames", "allowed_function_names")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise bad
    if mode == "NONE":
        return ToolChoice("none")
    if mode == "ANY":
        if names and len(names) == 1:
            return ToolChoice("function", names[0])
        return ToolChoice("required", allowed=tuple(names or ()))
    if mode == "VALIDATED" and names:
        return ToolChoice("auto", allowed=tuple(names))
    if mode in ("AUTO", "VALIDATED", "MODE_UNSPECIFIED"):
        return AUTO
    raise bad


def declared(tools: Sequence[Any] | None) -> list[str]:
    """The function names chat-shaped `tools` declare (entries without one are skipped)."""
    names = []
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def check(choice: ToolChoice, tools: Sequence[Any] | None) -> None:
    """The 400 a real API answers for a `tool_choice` the request's tools cannot satisfy."""
    if choice.mode in ("auto", "none"):
        return  # accepted with or without tools (see docs/conformance.md)
    if not tools:
        raise invalid(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            param="tool_choice",
        )
    names = declared(tools)
    if choice.mode == "function" and choice.name not in names:
        raise invalid(
            f"Invalid value for 'tool_choice': function {choice.name!r} is not one of the functions "
            f"declared in 'tools' ({', '.join(map(repr, names)) or 'none'}).",
            param="tool_choice",
        )


# --- holding a scripted reply to them ---------------------------------------------------------


def _text(reply: Reply, content: str) -> Reply:
    """`reply` as text only: its pacing kept, its calls and any usage recorded for them dropped."""
    return replace(reply, content=content, tool_calls=(), usage=None)


def _mismatch(script: Scenario, turn: int, problem: str) -> APIError:
    name = getattr(script, "name", None) or getattr(script, "__name__", "the scenario")
    return APIError(
        400,
        f"script_mismatch: the script of {name!r} {problem} at turn {turn}, which no real model could "
        "answer to this request. Change the script's turn, or what the agent sends.",
        param="tool_choice",
        code="script_mismatch",
    )


def constrain(
    reply: Reply,
    *,
    script: Scenario,
    turn: int,
    choice: ToolChoice,
    tools: Sequence[Any] | None,
    refuse_undeclared: bool = False,
) -> Reply:
    """`reply` as a real model could give it under `tools` and `choice`; a `script_mismatch`
    error where it cannot be (see the module's docstring)."""
    if not tools or choice.mode == "none":
        if not reply.tool_calls:
            return reply
        # The scenario's fallback, else the text the reply gives before its calls, else ours.
        return _text(reply, getattr(script, "fallback", None) or reply.content or FALLBACK_TEXT)
    names = declared(tools)
    if refuse_undeclared and (undeclared := [c.name for c in reply.tool_calls if c.name not in names]):
        raise _mismatch(
            script,
            turn,
            f"calls {', '.join(map(repr, undeclared))}, which the request's tools do not declare "
            f"({', '.join(map(repr, names))}), and the option undeclared_tools=refuse is set,",
        )
    if choice.mode == "required" and not reply.tool_calls:
        raise _mismatch(script, turn, "answers with text where tool_choice requires a tool call")
    if choice.allowed and (barred := [c.name for c in reply.tool_calls if c.name not in choice.allowed]):
        raise _mismatch(script, turn, f"calls {', '.join(map(repr, barred))} where tool_choice allows only "
                        f"{', '.join(map(repr, choice.allowed))}")
    if choice.mode == "function" and (
        not reply.tool_calls or any(c.name != choice.name for c in reply.tool_calls)
    ):
        called = ", ".join(repr(c.name) for c in reply.tool_calls) or "no function"
        raise _mismatch(script, turn, f"calls {called} where tool_choice names the function {choice.name!r}")
    return reply
