"""A scenario file's `mcp` section: the tools, resources and prompts its MCP server offers.

    "mcp": {"tools": [{"name": "read_file", "input_schema": {...}, "effect": false,
                       "calls": [{"text": "..."},
                                 [{"if": {"arguments_contain": "timeout"}, "is_error": true, "text": "..."},
                                  {"error": {"code": -32603, "message": "disk on fire"}}]],
                       "after_last": "repeat"}],
            "resources": [...], "prompts": [...]}

`calls[i]` answers the tool's call `i` (0-based: how many calls of this tool the server answered
before), as `turns[i]` answers turn `i`: one step, or a list of alternatives of which the first
whose `if` holds wins (`mcp_conditions`). A step answers with a result (`text`, `content`,
`structured`, optionally `is_error`), a JSON-RPC `error`, `hang` (until the client cancels) or
`drop` (the answer is lost with the connection); it may wait (`delay`), report `progress`, mark
its session to `expire` once answered, and say whether it ran the tool's side `effect`.
Everything is checked here, at start-up (docs/mcp.md has the table of keys).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, assert_never, get_args

from mockprovider.scripts import mcp_listings as listings
from mockprovider.scripts import values
from mockprovider.scripts.mcp_conditions import CallFacts, condition
from mockprovider.scripts.mcp_listings import PromptScript, ResourceScript
from mockprovider.scripts.values import At

Answer = Literal["result", "error", "hang", "drop"]
AfterLast = Literal["repeat", "error"]

SECTION_KEYS = ("tools", "resources", "prompts")
TOOL_KEYS = ("name", "title", "description", "input_schema", "output_schema", "annotations", "effect",
             "calls", "after_last")
ANSWER_KEYS = ("text", "content", "structured", "error", "hang", "drop")
STEP_KEYS = (*ANSWER_KEYS, "is_error", "delay", "progress", "progress_interval", "expire", "effect")
ERROR_KEYS = ("code", "message", "data")
PROGRESS_KEYS = ("progress", "total", "message")
ANNOTATION_KEYS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
BLOCK_FIELDS = {
    "text": ("text",), "image": ("data", "mimeType"), "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"), "resource": ("resource",),
}
"""The content block types a result may carry, and the fields each needs (as MCP names them)."""
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""The tool names MCP recommends: what every client can address."""
MAX_WAIT_MS = 300_000.0
"""As a model reply's `latency`: a step waits at most five minutes in all."""


class ScriptEnded(Exception):
    """A call past the last of a tool's `calls` under `after_last: "error"`, or one no alternative
    answers; the message says which (the server answers it as a JSON-RPC error)."""


@dataclass(frozen=True, kw_only=True)
class Progress:
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, kw_only=True)
class RpcError:
    code: int
    message: str
    data: Any = None


@dataclass(frozen=True, kw_only=True)
class Step:
    """How one call is answered."""

    answer: Answer
    content: tuple[dict[str, Any], ...] = ()
    """The result's content blocks (a `text` becomes one text block)."""
    structured: dict[str, Any] | None = None
    is_error: bool = False
    error: RpcError | None = None
    delay_ms: float = 0.0
    """Waited after any progress, before the answer."""
    progress: tuple[Progress, ...] = ()
    progress_interval_ms: float = 0.0
    """Waited before each progress notification."""
    expire: bool = False
    """The session ends once this call is answered: the client's next request meets 404."""
    effect: bool | None = None
    """Whether the call ran the tool's side effect; None: a tool with an effect runs it for a
    result that is not an error, and for a drop (the answer is lost, not the work)."""

    def runs_effect(self, tool_effect: bool) -> bool:
        if self.effect is not None:
            return self.effect
        match self.answer:
            case "result":
                return tool_effect and not self.is_error
            case "drop":
                return tool_effect
            case "error" | "hang":
                return False
            case _:
                assert_never(self.answer)

    def result(self) -> dict[str, Any]:
        """The `CallToolResult` of a result step, as MCP spells it."""
        out: dict[str, Any] = {"content": [dict(block) for block in self.content]}
        if self.structured is not None:
            out["structuredContent"] = self.structured
        if self.is_error:
            out["isError"] = True
        return out


@dataclass(frozen=True, kw_only=True)
class Choice:
    when: Any
    """A call condition (`mcp_conditions`), or None: always."""
    step: Step


@dataclass(frozen=True, kw_only=True, eq=False)
class ToolScript:
    """One scripted tool. Compared by identity: the server counts each script's calls."""

    name: str
    definition: dict[str, Any]
    """The tool as `tools/list` lists it (name, title, description, inputSchema, ...)."""
    effect: bool
    calls: tuple[tuple[Choice, ...], ...]
    after_last: AfterLast
    source: str

    def step(self, call: CallFacts) -> Step:
        index = call.index
        if index >= len(self.calls):
            match self.after_last:
                case "repeat":
                    index = len(self.calls) - 1
                case "error":
                    raise ScriptEnded(
                        f"The script of the tool {self.name!r} ({self.source}) has ended at call "
                        f"{call.index}: it has {len(self.calls)} calls (0 to {len(self.calls) - 1}) and "
                        "after_last is 'error'."
                    )
                case _:
                    assert_never(self.after_last)
        for choice in self.calls[index]:
            if choice.when is None or choice.when.holds(call):
                return choice.step
        raise ScriptEnded(
            f"No alternative of call {index} of the tool {self.name!r} ({self.source}) holds for these "
            "arguments; end the list with one that has no 'if' to give a fallback."
        )


@dataclass(frozen=True, kw_only=True)
class McpScript:
    """What one scenario file's MCP server offers."""

    tools: tuple[ToolScript, ...] = ()
    resources: tuple[ResourceScript, ...] = ()
    prompts: tuple[PromptScript, ...] = ()


def compile_mcp(value: Any, at: At) -> McpScript:
    """A scenario file's `mcp` object; raises `ScenarioFileError` naming what is wrong."""
    section = values.obj(value, at, SECTION_KEYS)
    if not section:
        raise at.error(f"expected at least one of: {', '.join(SECTION_KEYS)}")
    listed = values.array(section["tools"], at / "tools", "tools") if "tools" in section else []
    tools = tuple(_tool(tool, at / "tools" / i) for i, tool in enumerate(listed))
    _unique([t.name for t in tools], at / "tools", "tool")
    resources = listings.resources(section["resources"], at / "resources") if "resources" in section else ()
    prompts = listings.prompts(section["prompts"], at / "prompts") if "prompts" in section else ()
    return McpScript(tools=tools, resources=resources, prompts=prompts)


def _unique(names: list[str], at: At, what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise (at / i / "name").error(f"the {what} {name!r} is scripted twice in this file")
        seen.add(name)


def _tool(value: Any, at: At) -> ToolScript:
    tool = values.obj(value, at, TOOL_KEYS, required=("name", "calls"))
    name = values.string(tool["name"], at / "name", nonempty=True)
    if not TOOL_NAME.fullmatch(name):
        raise (at / "name").error(f"the tool name {name!r} is not one MCP clients can address: use 1 to 128 "
                                  "letters, digits, '_', '-' and '.'")
    definition: dict[str, Any] = {"name": name}
    for key, wire in (("title", "title"), ("description", "description")):
        if key in tool:
            definition[wire] = values.string(tool[key], at / key)
    definition["inputSchema"] = _schema(tool.get("input_schema", {"type": "object"}), at / "input_schema")
    if "output_schema" in tool:
        definition["outputSchema"] = _schema(tool["output_schema"], at / "output_schema")
    if "annotations" in tool:
        definition["annotations"] = _annotations(tool["annotations"], at / "annotations")
    effect = values.flag(tool, "effect", at)
    after_last = tool.get("after_last", "error")
    if after_last not in get_args(AfterLast):
        raise (at / "after_last").error(f"expected \"repeat\" or \"error\", got {json.dumps(after_last)}")
    calls = values.array(tool["calls"], at / "calls", "calls")
    return ToolScript(name=name, definition=definition, effect=effect, after_last=after_last,
                      source=at.source, calls=tuple(_call(c, at / "calls" / i) for i, c in enumerate(calls)))


def _schema(value: Any, at: At) -> dict[str, Any]:
    # MCP: a tool's input and output schemas describe objects (JSON Schema, not checked further here).
    schema = values.json_object(value, at)
    if schema.get("type") != "object":
        raise at.error('expected a JSON Schema whose "type" is "object", as MCP requires')
    return schema


def _annotations(value: Any, at: At) -> dict[str, Any]:
    notes = values.obj(value, at, ANNOTATION_KEYS)
    for key, note in notes.items():
        if key == "title":
            values.string(note, at / key)
        elif not isinstance(note, bool):
            raise (at / key).error(f"expected true or false, got {values.kind(note)}")
    return notes


def _call(value: Any, at: At) -> tuple[Choice, ...]:
    if isinstance(value, dict):
        if "if" in value:
            raise (at / "if").error("'if' belongs on an alternative: put this step in an array of "
                                    "alternatives")
        return (Choice(when=None, step=_step(value, at, STEP_KEYS)),)
    if isinstance(value, list):
        choices = values.array(value, at, "alternatives")
        return tuple(_choice(c, at / i) for i, c in enumerate(choices))
    raise at.error(f"expected a step object or an array of alternatives, got {values.kind(value)}")


def _choice(value: Any, at: At) -> Choice:
    step = _step(value, at, ("if", *STEP_KEYS))
    when = condition(value["if"], at / "if") if "if" in value else None
    return Choice(when=when, step=step)


def _step(value: Any, at: At, allowed: tuple[str, ...]) -> Step:
    step = values.obj(value, at, allowed)
    answer = _answer(step, at)
    for key in ("hang", "drop", "expire", "is_error", "effect"):
        values.flag(step, key, at)
    if step.get("is_error") and answer != "result":
        raise (at / "is_error").error("'is_error' marks a result: give it 'text', 'content' or 'structured'")
    progress = tuple(_progress(p, at / "progress" / i) for i, p in
                     enumerate(values.array(step["progress"], at / "progress", "progress steps"))
                     ) if "progress" in step else ()
    delay = values.number(step.get("delay", 0), at / "delay", 0, MAX_WAIT_MS)
    interval = values.number(step.get("progress_interval", 0), at / "progress_interval", 0, MAX_WAIT_MS)
    if delay + interval * len(progress) > MAX_WAIT_MS:
        raise at.error(f"waits longer than {MAX_WAIT_MS:g} ms in all (delay + progress_interval per step)")
    structured = _structured(step, at)
    return Step(
        answer=answer, content=_content(step, at, structured), is_error=step.get("is_error", False),
        structured=structured,
        error=_error(step["error"], at / "error") if "error" in step else None,
        delay_ms=delay, progress=progress, progress_interval_ms=interval,
        expire=step.get("expire", False), effect=step.get("effect"),
    )


def _answer(step: dict, at: At) -> Answer:
    results = [key for key in ("text", "content", "structured") if key in step]
    others = [key for key in ("error", "hang", "drop") if step.get(key, False) is not False]
    if len(others) > 1 or (others and results):
        given = ", ".join(repr(key) for key in [*results, *others])
        raise at.error(f"a step answers one way; it gives {given}")
    if others:
        return others[0]  # type: ignore[return-value]  # one of "error", "hang", "drop"
    if not results:
        raise at.error("expected an answer: 'text', 'content' or 'structured' (a result), 'error', "
                       "'hang' or 'drop'")
    return "result"


def _content(step: dict, at: At, structured: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    blocks: list[dict[str, Any]] = []
    if "text" in step:
        blocks.append({"type": "text", "text": values.string(step["text"], at / "text")})
    if "content" in step:
        for i, block in enumerate(values.array(step["content"], at / "content", "content blocks")):
            blocks.append(_block(block, at / "content" / i))
    if structured is not None and not blocks:
        # MCP: a tool returning structured content should also return it serialised, as text.
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        blocks.append({"type": "text", "text": text})
    return tuple(blocks)


def _block(value: Any, at: At) -> dict[str, Any]:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in BLOCK_FIELDS:
        raise (at / "type").error(f"expected a content block whose type is one of: {', '.join(BLOCK_FIELDS)}")
    block = values.json_object(value, at)
    for field in BLOCK_FIELDS[kind]:
        if field not in block:
            raise at.error(f"a {kind!r} block needs {field!r}")
    return block


def _structured(step: dict, at: At) -> dict[str, Any] | None:
    return values.json_object(step["structured"], at / "structured") if "structured" in step else None


def _error(value: Any, at: At) -> RpcError:
    error = values.obj(value, at, ERROR_KEYS, required=("code", "message"))
    code = int(values.number(error["code"], at / "code", -(2**31), 2**31 - 1, integer=True))
    return RpcError(code=code, message=values.string(error["message"], at / "message", nonempty=True),
                    data=values.json_value(error.get("data"), at / "data"))


def _progress(value: Any, at: At) -> Progress:
    step = values.obj(value, at, PROGRESS_KEYS, required=("progress",))
    return Progress(
        progress=values.number(step["progress"], at / "progress", 0, 1e15),
        total=values.number(step["total"], at / "total", 0, 1e15) if "total" in step else None,
        message=values.string(step["message"], at / "message") if "message" in step else None,
    )
