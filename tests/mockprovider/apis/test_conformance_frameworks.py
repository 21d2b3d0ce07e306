"""Agent frameworks reach their answer against the mock, unchanged, as their users run them.

Each runs only where its package is installed (`pip install -e '.[frameworks]'`); the plain SDK
cases of the same rules are in test_conformance.py and test_tool_choice.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from mockprovider.scripts.scenarios import ANSWER_PLAN
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


def test_langchains_azure_chat_openai_reaches_plans_answer_through_a_deployment(root):
    pytest.importorskip("langchain_openai")
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import AzureChatOpenAI

    llm = AzureChatOpenAI(azure_endpoint=root, azure_deployment="plan", api_version="2024-10-21",
                          api_key="unused", max_retries=2)
    results = {"list_files": "errors.log\nnotes.txt", "read_file": "worker 7 timed out after 30000 ms"}
    bound = llm.bind_tools([{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
                            for name in results])
    messages: list = [HumanMessage("Which file mentions a timeout?")]
    for _ in range(3):
        reply = bound.invoke(messages)
        messages.append(reply)
        messages += [ToolMessage(results[c["name"]], tool_call_id=c["id"]) for c in reply.tool_calls]
        if not reply.tool_calls:
            break
    assert reply.content == ANSWER_PLAN
    called = [m.tool_calls[0]["name"] for m in messages if getattr(m, "tool_calls", None)]
    assert called == ["list_files", "read_file"]


def test_langchains_azure_chat_openai_streams_and_retries_a_scripted_429(root, caplog):
    pytest.importorskip("langchain_openai")
    from langchain_openai import AzureChatOpenAI

    caplog.set_level(logging.INFO, logger="mockprovider")
    deployment = "plan+fault=429@0x2+retry=10"
    llm = AzureChatOpenAI(azure_endpoint=root, azure_deployment=deployment, api_version="2024-10-21",
                          api_key="unused", max_retries=2)
    chunks = list(llm.stream("Which file mentions a timeout?"))
    assert len(chunks) > 2 and "".join(str(c.content) for c in chunks)  # without tools: plan's text
    statuses = [r.getMessage().rpartition(" ")[2] for r in caplog.records if deployment in r.getMessage()]
    assert statuses == ["status=429", "status=429", "status=ok"]
