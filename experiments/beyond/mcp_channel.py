"""The chapter's tools behind the mock's MCP server, and the ways their errors can arrive there.

The model stays the chapter's (`recover`, `denied`, the built-in scenarios); its four tools move
to an MCP server scripted to answer exactly what the chapter's tools answer — the same
definitions, the same listing, the same file, the same error sentences, all read off the
chapter's own tools over a fresh sandbox — except in how a failure travels:

- `is_error`: a result with `isError: true` carrying the sentence (what MCP says tools should do);
- `rpc_error`: a JSON-RPC error whose message is the sentence;
- `dropped`: the connection drops before the answer: the client learns nothing but that.

The harness meets them through `McpTool`, the plain adapter a harness would write: a failure
becomes an exception with its own sentence (the adapter's `LOST` for a dropped answer), and the
run's wording policy decides what the model is told. Nothing in MCP marks an error permanent.

Before a run is measured, `predict` says what it will cost from a measured run of the chapter
rerun and the scenario's rule alone: the same replies, turn for turn, with each failing tool
message's tokens swapped for the ones this channel sends (`o200k`'s count is additive per message).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import httpx
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

import o200k
from experiments.arithmetic.profile import micro
from experiments.lab.runs import Env, Run
from experiments.lab.servers import mock_server
from harness import Cancel, Tool, ToolContext
from harness.chapter import FORBIDDEN, chapter_tools, make_sandbox
from harness.tools import error_text

Channel = Literal["is_error", "rpc_error", "dropped"]
CHANNELS: tuple[Channel, ...] = ("is_error", "rpc_error", "dropped")
LOST = "the tool's answer was lost: the connection to its MCP server dropped"
"""What the adapter says of a call whose answer never came."""
MISSING = "timeout.log"
"""The file `recover` asks for first, which is not there."""


class ToolFailed(Exception):
    """A call of an MCP tool that failed; the message is the failure's own sentence."""


@dataclass(frozen=True)
class McpTool:
    """A tool of an MCP server as a harness tool: the call goes over MCP; an `isError` result, a
    JSON-RPC error and a lost answer each become a `ToolFailed` with its sentence."""

    client: Client
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool
    needs_approval: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        try:
            result = await self.client.call_tool(self.name, args)
        except MCPError as e:
            raise ToolFailed(LOST if e.error.code == CONNECTION_CLOSED else e.error.message) from None
        text = "\n".join(block.text for block in result.content if block.type == "text")
        if result.is_error:
            raise ToolFailed(text)
        return text


@asynccontextmanager
async def mcp_tools(url: str) -> AsyncIterator[list[Tool]]:
    """The tools of the MCP server at `url`, each an `McpTool`, over one session."""
    async with Client(url, mode="legacy") as client:
        listed = (await client.list_tools()).tools
        yield [McpTool(client=client, name=t.name, description=t.description or "", parameters=t.input_schema,
                       read_only=bool(t.annotations and t.annotations.read_only_hint)) for t in listed]


async def _chapter_answers(workdir: Path) -> dict[str, str]:
    """What the chapter's own tools answer, over a fresh sandbox, for the calls the runs make."""
    tools = {t.name: t for t in chapter_tools(make_sandbox(workdir / "mcp-sandbox"))}
    ctx = ToolContext(run_id="mcp-script", call_id="c0", cancel=Cancel(), progress=lambda _: None)
    answers = {"list_files": await tools["list_files"].run({}, ctx),
               "errors.log": await tools["read_file"].run({"path": "errors.log"}, ctx)}
    for path in (MISSING, FORBIDDEN):
        try:
            await tools["read_file"].run({"path": path}, ctx)
        except Exception as e:  # the sentence each failure says, whatever its type
            answers[path] = str(e)
    return answers


def _failing(channel: Channel, sentence: str, rpc_message: str | None) -> dict[str, Any]:
    match channel:
        case "is_error":
            return {"is_error": True, "text": sentence}
        case "rpc_error":
            return {"error": {"code": -32603, "message": rpc_message or sentence}}
        case "dropped":
            return {"drop": True}


def scenario(channel: Channel, answers: dict[str, str], workdir: Path, rpc_message: str | None = None
             ) -> dict[str, Any]:
    """The MCP server of `channel`: the chapter's four tools, scripted to answer as they do
    (`rpc_message`: what its JSON-RPC errors say instead of the tool's sentence)."""
    defined = []
    for tool in chapter_tools(make_sandbox(workdir / "mcp-sandbox")):
        definition = {"name": tool.name, "description": tool.description, "input_schema": tool.parameters,
                      "annotations": {"readOnlyHint": tool.read_only}, "after_last": "repeat"}
        if tool.name == "list_files":
            definition["calls"] = [{"text": answers["list_files"]}]
        elif tool.name == "read_file":
            definition["calls"] = [[
                {"if": {"arguments_include": {"path": "errors.log"}}, "text": answers["errors.log"]},
                {"if": {"arguments_include": {"path": MISSING}},
                 **_failing(channel, answers[MISSING], rpc_message)},
                {"if": {"arguments_include": {"path": FORBIDDEN}},
                 **_failing(channel, answers[FORBIDDEN], rpc_message)},
                {"is_error": True, "text": "unscripted path"},
            ]]
        else:  # offered (their definitions are part of every prompt), never called by these scenarios
            definition["calls"] = [{"is_error": True, "text": f"{tool.name} is not scripted here"}]
        defined.append(definition)
    return {"name": f"mcp_{channel}", "description": f"The chapter's tools over MCP, failing as {channel}.",
            "mcp": {"tools": defined}}


@dataclass(frozen=True, kw_only=True)
class McpMock:
    env: Env
    """The experiment's env, its model calls going to this mock too."""
    root: str

    def url(self, channel: Channel) -> str:
        return f"{self.root}/mcp/mcp_{channel}"

    def calls_seen(self, channel: Channel, tool: str) -> int:
        """How many `tools/call`s of `tool` this channel's server received (its journal)."""
        query = {"kind": "mcp", "tool": tool}
        entries = httpx.get(f"{self.root}/journal", params=query, timeout=10).json()["data"]
        return sum(1 for e in entries if e["path"] == f"/mcp/mcp_{channel}" and e["direction"] == "in")


@asynccontextmanager
async def mcp_mock(env: Env, name: str, rpc_message: str | None = None) -> AsyncIterator[McpMock]:
    """A mock of its own (its own process), serving the chapter's models at /v1 and one MCP server
    per channel, with a journal: both sides of every run, from the server's side. `rpc_message`
    replaces the sentence in JSON-RPC errors (the tests' broken run: "Internal error", say)."""
    folder = env.workdir / f"{name}-scenarios"
    folder.mkdir(parents=True, exist_ok=True)
    answers = await _chapter_answers(env.workdir / name)
    for channel in CHANNELS:
        script = scenario(channel, answers, env.workdir / name, rpc_message)
        (folder / f"mcp_{channel}.json").write_text(json.dumps(script))
    with ExitStack() as stack:
        started = mock_server("--scenarios", str(folder), "--journal", "100000")
        base_url, _ = await asyncio.to_thread(stack.enter_context, started)
        yield McpMock(env=replace(env, base_url=base_url, client=None), root=base_url.removesuffix("/v1"))


# --- prediction: a measured run of the chapter rerun, its failing tool messages re-worded ----------


@dataclass(frozen=True, kw_only=True)
class Predicted:
    turns: int
    tool_runs: int
    input: int
    output: int
    cost_micro: Fraction
    answer: str


def told(policy: str, sentence: str) -> str:
    """What the harness tells the model of a failure saying `sentence` under `policy`."""
    return error_text(policy, ToolFailed(sentence))  # type: ignore[arg-type]


def predict(base: Run, old: str, new: str) -> Predicted:
    """`base`'s run again, every tool message saying `old` now saying `new`: the replies are the
    same (the scenario reads only what `base` read), each prompt carrying k such messages grows by
    k × (the tokens of the new message − those of the old)."""
    s = base.state
    prompts, carried = [], 0
    for message in s.messages:
        if message.get("role") == "assistant":
            prompts.append(carried)
        elif message.get("role") == "tool" and message.get("content") == old:
            carried += 1
    delta = _tokens(new) - _tokens(old)
    inputs = sum(u.prompt_tokens for u in s.turn_usage) + delta * sum(prompts[: len(s.turn_usage)])
    outputs = sum(u.completion_tokens for u in s.turn_usage)
    return Predicted(turns=s.turns, tool_runs=base.tool_runs, input=inputs, output=outputs,
                     cost_micro=micro(inputs, outputs), answer=s.answer or "")


def _tokens(content: str) -> int:
    return o200k.message_tokens({"role": "tool", "content": content, "tool_call_id": "c"})


def measured_micro(r: Run) -> Fraction:
    s = r.state
    return micro(sum(u.prompt_tokens for u in s.turn_usage), sum(u.completion_tokens for u in s.turn_usage))


def matches(r: Run, p: Predicted) -> bool:
    """Whether a run came out as predicted: to the token and the micro-dollar."""
    s = r.state
    came = (s.turns, r.tool_runs, s.prompt_tokens, s.completion_tokens, measured_micro(r), s.answer or "")
    return came == (p.turns, p.tool_runs, p.input, p.output, p.cost_micro, p.answer)

