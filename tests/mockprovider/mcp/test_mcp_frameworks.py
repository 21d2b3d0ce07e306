"""Two frameworks' own MCP clients — the Agents SDK's `MCPServerStreamableHttp` and pydantic-ai's
`MCPToolset` — drive a scripted conversation: the model (the scenario's turns) asks for an MCP
tool, the tool's scripted fault is what the agent must survive, and the journal shows both sides.

Each runs only where its framework is installed (the `peers` extra, pinned), as the other
framework tests do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_support import Served, served

from mockprovider.mcp.calls import tool_calls

# The frameworks' own deprecation warnings (pydantic, their dependencies) are theirs to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning")

TOLD = "no such file: timeout.log. Call list_files to see what exists."
RECOVERED = "errors.log mentions a timeout."
GAVE_UP = "I could not read the file, so I do not know."
FAULTS = {
    "is_error": {"is_error": True, "text": TOLD},
    "rpc_error": {"error": {"code": -32603, "message": TOLD}},
    "dropped": {"drop": True},
}


def scenario(name: str, fault: dict[str, Any]) -> dict[str, Any]:
    """The chapter's `recover` in one file: the model's turns, and its read_file an MCP tool."""
    return {
        "name": name,
        "turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "timeout.log"}}]},
            [{"if": {"tool_result_contains": "Call list_files"}, "content": RECOVERED}, {"content": GAVE_UP}],
        ],
        "after_last": "repeat",
        "mcp": {"tools": [{"name": "read_file", "description": "Read a file in the working folder.",
                           "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                                            "required": ["path"]},
                           "calls": [fault], "after_last": "repeat"}]},
    }


@pytest.fixture(scope="module")
def mock() -> Iterator[Served]:
    with served(*(scenario(name, fault) for name, fault in FAULTS.items())) as mock:
        yield mock


async def agents_sdk(mock: Served, name: str) -> str:
    agents = pytest.importorskip("agents")
    from agents.mcp import MCPServerStreamableHttp
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    async with MCPServerStreamableHttp(params={"url": f"{mock.mcp_url}/{name}"}) as server, \
            AsyncOpenAI(base_url=f"{mock.root}/v1", api_key="unused") as client:
        agent = agents.Agent(name="files", instructions="Answer from the files.", mcp_servers=[server],
                             model=agents.OpenAIChatCompletionsModel(model=name, openai_client=client))
        return (await agents.Runner.run(agent, "What does timeout.log say?", max_turns=6)).final_output


async def pydantic_ai(mock: Served, name: str) -> str:
    pytest.importorskip("pydantic_ai")
    pytest.importorskip("fastmcp")
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async with AsyncOpenAI(base_url=f"{mock.root}/v1", api_key="unused") as client:
        model = OpenAIChatModel(name, provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, toolsets=[MCPToolset(f"{mock.mcp_url}/{name}")])
        async with agent:
            return (await agent.run("What does timeout.log say?")).output


FRAMEWORKS = {"agents_sdk": agents_sdk, "pydantic_ai": pydantic_ai}
# What each framework makes of each fault, as these pinned versions do: the Agents SDK tells the
# model only "MCP tool returned an error" for a JSON-RPC error; pydantic-ai passes its message on.
EXPECTED = {
    ("agents_sdk", "is_error"): RECOVERED, ("agents_sdk", "rpc_error"): GAVE_UP,
    ("agents_sdk", "dropped"): GAVE_UP,
    ("pydantic_ai", "is_error"): RECOVERED, ("pydantic_ai", "rpc_error"): RECOVERED,
    ("pydantic_ai", "dropped"): GAVE_UP,
}
OUTCOMES = {"is_error": "tool_error", "rpc_error": "error", "dropped": "dropped"}


@pytest.mark.parametrize(("framework", "fault"), list(EXPECTED))
def test_the_framework_survives_the_tool_s_scripted_fault(mock: Served, framework: str, fault: str):
    mock.app.state.config.journal.clear()
    answer = asyncio.run(FRAMEWORKS[framework](mock, fault))
    assert answer == EXPECTED[framework, fault]
    entries = mock.app.state.config.journal.entries()
    (call,) = tool_calls(entries, "read_file")
    assert call.outcome == OUTCOMES[fault] and call.arguments == {"path": "timeout.log"}
    # Model and tool traffic interleave: the call comes between the turn that asked and the next.
    story = [e.kind if e.kind == "model" else e.tool for e in entries if e.kind == "model" or
             (e.tool == "read_file" and e.direction == "in")]
    assert story == ["model", "read_file", "model"]
