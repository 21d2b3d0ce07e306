"""A framework through Bedrock's Converse surface: LangChain's `ChatBedrockConverse` (langchain-aws,
the `frameworks-bedrock` extra) runs `plan`'s tool loop against the mock, plain and streamed, as
its users run it against Bedrock (skipped when langchain-aws is not installed)."""

from __future__ import annotations

import pytest

from mockprovider.scripts.scenarios import ANSWER_PLAN

RESULTS = {"list_files": "errors.log\nnotes.txt", "read_file": "worker 7 timed out after 30000 ms"}


def _tools():
    from langchain_core.tools import tool

    @tool
    def list_files() -> str:
        """List the files in the folder."""
        return RESULTS["list_files"]

    @tool
    def read_file(path: str) -> str:
        """Read one file."""
        return RESULTS["read_file"]

    return {t.name: t for t in (list_files, read_file)}


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_chat_bedrock_converse_runs_plan_to_the_answer(mock_url, stream):
    pytest.importorskip("langchain_aws")
    from langchain_aws import ChatBedrockConverse
    from langchain_core.messages import HumanMessage

    model = ChatBedrockConverse(model="us.plan", base_url=mock_url.removesuffix("/v1"),
                                region_name="us-east-1", aws_access_key_id="unused",
                                aws_secret_access_key="unused")
    tools = _tools()
    bound = model.bind_tools(list(tools.values()))
    messages: list = [HumanMessage("Which file mentions a timeout?")]
    calls_made = []
    for _ in range(3):
        if stream:
            reply = None
            for chunk in bound.stream(messages):
                reply = chunk if reply is None else reply + chunk
        else:
            reply = bound.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            calls_made.append((call["name"], call["args"]))
            messages.append(tools[call["name"]].invoke(call))
    assert calls_made == [("list_files", {}), ("read_file", {"path": "errors.log"})]
    assert reply.text == ANSWER_PLAN
    assert reply.usage_metadata["output_tokens"] > 0
