"""One real round trip through llama.cpp: skipped unless the `local-model` extra is installed.

Loading the 135M model takes about a second; each check asks for a few tokens at most.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("xllamacpp")
server = pytest.importorskip("experiments.real_model.server")

from harness import Limits, ModelClient, OpenAIChat, new_run, run  # noqa: E402
from harness.chapter import chapter_tools, make_sandbox  # noqa: E402
from harness.tools import schema  # noqa: E402

try:
    server.model_path()
except RuntimeError as e:
    pytest.skip(str(e), allow_module_level=True)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # 16 reply tokens: enough for a sentence or a call, few enough to stay quick on two cores.
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with server.local_model(log, n_predict=16, timeout_s=60) as url:
        yield url


def test_the_template_renders_tools_calls_and_results(base_url: str) -> None:
    messages = [
        {"role": "user", "content": "Read notes.txt."},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "notes.txt"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Remember to rotate your logs."},
    ]
    body = {"messages": messages, "tools": [schema(t) for t in chapter_tools(Path("."))]}
    reply = httpx.post(base_url.removesuffix("/v1") + "/apply-template", json=body, timeout=30)
    prompt = reply.json()["prompt"]
    assert '"name": "scan_archive"' in prompt
    assert '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>' in prompt
    assert "<tool_response>\nRemember to rotate your logs.\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_the_unchanged_harness_runs_against_it(base_url: str, tmp_path: Path) -> None:
    state = new_run("How many files are in the directory?")
    tools = chapter_tools(make_sandbox(tmp_path / "sb"), scan_seconds=0.1)

    async def go() -> None:
        async with ModelClient(base_url) as client:
            model = OpenAIChat("smollm2", client=client)
            await run(state, model=model, tools=tools, limits=Limits(max_turns=1))

    asyncio.run(go())
    assert state.turns == 1
    assert state.status != "running"
    assert state.prompt_tokens > 0 and state.completion_tokens > 0
