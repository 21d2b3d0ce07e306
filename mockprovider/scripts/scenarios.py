"""The scripts. Each scenario is a pure function of the conversation.

`turn` is the number of assistant messages in the request and `tool_text` the contents of
every tool message joined by newlines: both derive from the conversation (`transcript.read`
derives them, for every wire format), so no variable on the server holds a run. Adding a
scenario is adding one function to `SCENARIOS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mockprovider.errors import APIError
from o200k import text_of


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """JSON-encoded, as the wire carries it."""


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts recorded from a real model, served instead of the recount when asked."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True, kw_only=True)
class Reply:
    """What the model says this turn: prose, tool calls, or both (the text comes first); or an
    error instead. The pacing fields apply to this reply only, on top of the request's options."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    error: APIError | None = None
    """Answered instead of a completion, in the wire format's own error shape."""
    latency_ms: float = 0.0
    """Waited before the reply starts, after the options' latency: its time to first token."""
    rate_tps: float | None = None
    """Streaming pace in tokens per second; None: the options' `rate`."""
    chunk: int = 1
    """Tokens per streamed delta."""
    usage: Usage | None = None
    """Recorded counts; served only under the `usage=recorded` option."""
    reasoning: str | int | None = None
    """What the model thought before replying, billed as output: its text (counted with o200k,
    shown as a Responses reasoning summary and a Messages thinking block) or just a token count."""


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """What a scenario sees of a request (`transcript.Transcript.conversation` makes it)."""

    turn: int
    tool_text: str
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]] = ()
    """The tool definitions the request offers, in chat shape."""

    @property
    def last_tool_result(self) -> str:
        tools = [m for m in self.messages if m.get("role") == "tool"]
        return text_of(tools[-1].get("content")) if tools else ""


def text(content: str) -> Reply:
    return Reply(content=content)


def asks(call_id: str, name: str, args: Mapping[str, Any] | None = None) -> Reply:
    arguments = json.dumps(args, separators=(",", ":")) if args else "{}"  # most calls: no arguments
    if len(call_id) + len(name) + len(arguments) > 4096:
        return _reply(call_id, name, arguments)
    return _asked(call_id, name, arguments)


def _reply(call_id: str, name: str, arguments: str) -> Reply:
    return Reply(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))


_asked = lru_cache(maxsize=1024)(_reply)
"""A Reply is a value, so one per distinct short call serves every request that asks it: a
script asks the same few calls in every run (results/bench.md, speed tricks: "short tool calls'
replies cached"). Short calls only: bounded memory."""


ANSWER_PLAN = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
ANSWER_FOLDER = "The folder holds errors.log, access.log, notes.txt and private.key."
ANSWER_DELETED = "Deleted access.log to free space."
ANSWER_DECLINED = "I did not delete anything: you declined the deletion."


def plan(c: Conversation) -> Reply:
    """List, read, answer: a well-behaved three-turn task."""
    if c.turn == 0:
        return asks("c1", "list_files")
    if c.turn == 1:
        return asks("c2", "read_file", {"path": "errors.log"})
    return text(ANSWER_PLAN)


def runaway(c: Conversation) -> Reply:
    """Asks for list_files every turn and never declares itself done."""
    return asks(f"c{c.turn}", "list_files")


def recover(c: Conversation) -> Reply:
    """Guesses a file name, then corrects itself only if the error said how."""
    if c.turn == 0:
        return asks("c1", "read_file", {"path": "timeout.log"})
    if "Call list_files" not in c.tool_text:
        return text("I could not read the file, so I do not know.")
    if c.turn == 1:
        return asks("c2", "list_files")
    if c.turn == 2:
        return asks("c3", "read_file", {"path": "errors.log"})
    return text("errors.log mentions a timeout.")


def denied(c: Conversation) -> Reply:
    """Keeps asking for a file the process may not open, forever."""
    return asks(f"c{c.turn + 1}", "read_file", {"path": "private.key"})


def once(c: Conversation) -> Reply:
    """Baseline for the dedupe measurement: one list_files, then an answer."""
    return asks("c1", "list_files") if c.turn == 0 else text(ANSWER_FOLDER)


def repeat(c: Conversation) -> Reply:
    """The same task, with the identical list_files call repeated in the next turn."""
    if c.turn < 2:
        return asks(f"c{c.turn + 1}", "list_files")
    return text(ANSWER_FOLDER)


def destructive(c: Conversation) -> Reply:
    """Lists files, then asks to delete one; believes whatever the tool result says."""
    if c.turn == 0:
        return asks("c1", "list_files")
    if c.turn == 1:
        return asks("c2", "delete_file", {"path": "access.log"})
    result = c.last_tool_result.lower()
    if "declined" in result or "rejected" in result:
        return text(ANSWER_DECLINED)
    return text(ANSWER_DELETED)


def double_delete(c: Conversation) -> Reply:
    """The identical delete asked twice, in two turns, under two call ids."""
    if c.turn < 2:
        return asks(f"c{c.turn + 1}", "delete_file", {"path": "access.log"})
    return text("Done: access.log is deleted.")


def slow(c: Conversation) -> Reply:
    """Asks for the slow scan_archive tool, then answers from its result."""
    if c.turn == 0:
        return asks("c1", "scan_archive")
    return text(f"The archive scan says: {c.last_tool_result}")


def research(c: Conversation) -> Reply:
    """Delegates a question to the research sub-agent, then answers from its summary."""
    if c.turn == 0:
        return asks("c1", "research", {"question": "Which file mentions a timeout?"})
    return text(f"Research summary: {c.last_tool_result}")


Scenario = Callable[[Conversation], Reply]

SCENARIOS: dict[str, Scenario] = {
    f.__name__: f
    for f in (plan, runaway, recover, denied, once, repeat, destructive, double_delete, slow, research)
}


def describe(script: Scenario) -> str:
    """The scenario's one-line description (its docstring)."""
    lines = (script.__doc__ or "").strip().splitlines()
    return lines[0] if lines else ""

