"""Agent frameworks reach their answer against the mock, unchanged, as their users run them.

Each runs only where its package is installed (`pip install -e '.[frameworks]'`); the plain SDK
cases of the same rules are in test_conformance.py and test_tool_choice.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from mockprovider.server import serve_in_thread

# The frameworks' own deprecation warnings (pydantic, their dependencies) are theirs to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning")

ANSWER = "errors.log mentions a timeout."
REACT = {
    "name": "react_plan",
    "description": "A ReAct-shaped script for text-only agents: one action, then the answer.",
    "turns": [
        {"content": "Thought: I need to see the files first.\nAction: list_files\nAction Input: {}"},
        {"content": f"Thought: I can answer without using any more tools.\nAnswer: {ANSWER}"},
    ],
    "after_last": "repeat",
}
FINAL_ANSWER = {
    "name": "final_plan",
    "description": "Lists the files, then ends by calling final_answer (for tool_choice: required).",
    "turns": [
        {"tool_calls": [{"name": "list_files", "arguments": {}}]},
        {"tool_calls": [{"name": "final_answer", "arguments": {"answer": ANSWER}}]},
    ],
    "after_last": "repeat",
}
LOOPING = {
    "name": "loops",
    "description": "Calls list_files every turn; its fallback answers the cap's final-answer request.",
    "fallback": ANSWER,
    "turns": [{"tool_calls": [{"name": "list_files", "arguments": {}}]}],
    "after_last": "repeat",
}


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    """The mock's address without `/v1`: each test picks its scenario in the base URL."""
    with serve_in_thread(scenario_files=[REACT, FINAL_ANSWER, LOOPING]) as url:
        yield url.removesuffix("/v1")


def list_files() -> str:
    """List the files in the working folder."""
    return "errors.log\naccess.log\nnotes.txt"


def test_llamaindex_react_agent_reaches_the_answer_with_a_real_model_name(root):
    pytest.importorskip("llama_index.core")
    pytest.importorskip("llama_index.llms.openai")
    from llama_index.core.agent.workflow import ReActAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai import OpenAI

    # LlamaIndex's OpenAI class refuses model names it does not know: the scenario is in the URL.
    llm = OpenAI(model="gpt-4o", api_base=f"{root}/o/scenario=react_plan/v1", api_key="unused")

    async def main() -> str:
        agent = ReActAgent(tools=[FunctionTool.from_defaults(list_files)], llm=llm)
        return str(await agent.run(user_msg="Which file mentions a timeout?"))

    assert ANSWER in asyncio.run(main())


def _smolagents_agent(root: str, scenario: str, max_steps: int):
    smolagents = pytest.importorskip("smolagents")
    model = smolagents.OpenAIServerModel(
        model_id="gpt-4o", api_base=f"{root}/o/scenario={scenario}/v1", api_key="unused"
    )
    return smolagents.ToolCallingAgent(tools=[smolagents.tool(list_files)], model=model, max_steps=max_steps)


def test_smolagents_tool_calling_agent_ends_with_its_final_answer_call(root):
    agent = _smolagents_agent(root, "final_plan", max_steps=5)
    assert agent.run("Which file mentions a timeout?") == ANSWER


def test_smolagents_at_its_step_cap_gets_a_text_final_answer(root):
    """At the cap smolagents asks for a final answer without tools: text, never a tool call."""
    agent = _smolagents_agent(root, "loops", max_steps=2)
    assert agent.run("Which file mentions a timeout?") == ANSWER
