"""The kit's tools over MCP (`job.mcp_url`): the same tools, the same ledger, the same verdicts as
the tools wrapped into the framework, with the official MCP client and the Agents SDK's."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from exitkit.contract import Job
from exitkit.ledger import Event
from exitkit.mcp import served
from exitkit.runner import Kit
from exitkit.setup import Setup
from exitkit.verdict import Result

Judge = Callable[[str, str], Result]
ROOT = Path(__file__).parents[2]


def _job(folder: Path) -> Job:
    return Setup(base_url="http://127.0.0.1:9/v1", scenario="plan", folder=folder).make().job()


def _untimed(summary: str) -> str:
    """A case's summary without its timings (how many ms Stop took differs from run to run)."""
    return re.sub(r"\d+(\.\d+)? ms", "… ms", summary)


def _seen(events: list[Event]) -> list[tuple[str, str, dict[str, Any], str, bool]]:
    """The ledger as a verdict reads it; `pid` is compared with the process the tools ran in."""
    return [(e.tool, e.event, e.args, e.detail, e.pid == os.getpid()) for e in events]


def test_the_tools_listed_over_mcp_are_job_tools_with_their_descriptions_and_schemas(tmp_path: Path) -> None:
    job = _job(tmp_path)

    async def listed(url: str) -> list[Any]:
        async with Client(url) as client:
            return (await client.list_tools()).tools

    with served(job.tools) as url:
        tools = asyncio.run(listed(url))
    assert [(t.name, t.description, t.input_schema) for t in tools] == [
        (t.name, t.description, t.parameters) for t in job.tools]
    assert [t.annotations.destructive_hint for t in tools] == [not t.read_only for t in job.tools]


def test_a_tool_called_over_mcp_lands_in_the_ledger_exactly_like_a_wrapped_call(tmp_path: Path) -> None:
    wrapped, over_mcp = _job(tmp_path / "wrapped"), _job(tmp_path / "mcp")
    calls = [("list_files", {}), ("read_file", {"path": "errors.log"}),
             ("read_file", {"path": "private.key"}), ("read_file", {"path": "gone.log"}),
             ("delete_file", {"path": "notes.txt"})]

    async def directly() -> list[tuple[str, bool]]:
        out = []
        for name, args in calls:
            try:
                out.append((await wrapped.tool(name).call(**args), False))
            except Exception as e:  # the text a wrapped adapter hands the model
                out.append((str(e), True))
        return out

    async def by_mcp(url: str) -> list[tuple[str, bool]]:
        async with Client(url) as client:
            results = [await client.call_tool(name, args) for name, args in calls]
        return [(r.content[0].text, r.is_error) for r in results]

    answers = asyncio.run(directly())
    with served(over_mcp.tools) as url:
        assert asyncio.run(by_mcp(url)) == answers
    ledger = Setup(base_url="", scenario="plan", folder=tmp_path / "wrapped").ledger
    mcp_ledger = Setup(base_url="", scenario="plan", folder=tmp_path / "mcp").ledger
    assert _seen(mcp_ledger.events()) == _seen(ledger.events())
    assert [e.event for e in mcp_ledger.events() if e.tool == "delete_file"] == ["start", "effect"]
    assert sorted(p.name for p in (tmp_path / "mcp" / "sandbox").iterdir()) == sorted(
        p.name for p in (tmp_path / "wrapped" / "sandbox").iterdir())


def test_a_cancelled_mcp_call_cancels_the_kits_tool_and_the_ledger_says_so(tmp_path: Path) -> None:
    setup = Setup(base_url="", scenario="slow", folder=tmp_path, scan_seconds=30.0).make()

    async def cancelled(url: str) -> None:
        async with Client(url) as client:
            call = asyncio.ensure_future(client.call_tool("scan_archive", {}))
            while not setup.ledger.count("scan_archive"):  # noqa: ASYNC110 (another process writes it)
                await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            # notifications/cancelled reached it (the ledger is a file: no event to wait on)
            while not setup.ledger.count("scan_archive", "cancelled"):  # noqa: ASYNC110
                await asyncio.sleep(0.01)

    with served(setup.job().tools) as url:
        asyncio.run(asyncio.wait_for(cancelled(url), 20))
    assert [e.event for e in setup.ledger.events()] == ["start", "cancelled"]


def test_a_job_carries_mcp_url_only_for_an_adapter_that_asks_for_its_tools_over_mcp(kit: Kit) -> None:
    over_mcp = kit.measure("mcp_loop:ListsOverMcp", setup := kit.setup("plan"))
    url, *listed, text = over_mcp.outcome.answer.split(" ", 5)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    assert listed == ["list_files", "read_file", "delete_file", "scan_archive"]
    assert text == "Remember to rotate your logs.\n"
    # The call ran in the run's own process, as a wrapped one does.
    assert [(e.tool, e.event) for e in over_mcp.events] == [("read_file", "called over MCP"),
                                                            ("read_file", "start")]
    assert over_mcp.events[0].pid == over_mcp.events[1].pid not in (0, os.getpid())
    assert setup.ledger.count("read_file") == 1
    assert kit.measure("mcp_loop:Wrapped", kit.setup("plan")).outcome.answer == "None"


A = "exitkit.adapters."
PAIRS = {"agents": (f"{A}agents_sdk:AgentsSDK", f"{A}agents_sdk_mcp:AgentsSDKOverMCP"),
         "pydantic_ai": (f"{A}pydantic_ai:PydanticAI", f"{A}pydantic_ai_mcp:PydanticAIOverMCP")}
EXPLAINED = {"agents": f"{A}agents_sdk:AgentsSDKExplained",
             "pydantic_ai": f"{A}pydantic_ai:PydanticAIModelRetry"}
SLOW = [pytest.param(f, c, marks=pytest.mark.slow)
        for f in PAIRS for c in ("permanent_error", "turn_cap", "approval")]
FAST = [(f, c) for f in PAIRS for c in ("crash", "cancellation")]


@pytest.mark.parametrize(("framework", "case"), [*FAST, *SLOW])
def test_a_framework_over_mcp_gets_the_verdict_it_gets_with_wrapped_tools(judge: Judge, framework: str,
                                                                         case: str) -> None:
    pytest.importorskip(framework)
    wrapped, over_mcp = (judge(spec, case) for spec in PAIRS[framework])
    if (framework, case) == ("pydantic_ai", "permanent_error"):
        # Wrapped, the PermissionError ends the run with its reason; over MCP it is an `isError`
        # result, which MCPToolset hands back as a retry until pydantic-ai gives up (docs/exitkit.md).
        assert (wrapped.summary, over_mcp.verdict) == ("stops after 1 call · reason given", "fail")
        assert "UnexpectedModelBehavior" in over_mcp.summary
        return
    assert over_mcp.verdict == wrapped.verdict != "error", (wrapped.summary, over_mcp.summary)
    if case == "crash":  # the effect ran in the killed process, and again after the resume, both ways
        assert over_mcp.figures["delete_file runs"] == wrapped.figures["delete_file runs"] == 2
        assert over_mcp.figures["crashed process exit"] == -9
    if case == "cancellation":  # Stop reached the kit's tool through notifications/cancelled
        assert over_mcp.figures["tool saw it"] is True and over_mcp.figures["tool finished anyway"] is False
        assert over_mcp.figures["requests after Stop"] == wrapped.figures["requests after Stop"] == 0
    if framework == "agents" or case != "crash":  # pydantic-ai's wrapped crash raises; see the docs
        assert _untimed(over_mcp.summary) == _untimed(wrapped.summary)


@pytest.mark.parametrize("framework", PAIRS)
def test_over_mcp_a_tool_error_reaches_the_model_as_the_documented_error_setting_sends_it(
        judge: Judge, framework: str) -> None:
    """MCP answers a failed tool with `isError` and its text: the framework's handling of a raised
    tool error (the Agents SDK's generic `failure_error_function`, pydantic-ai's re-raise) never applies."""
    pytest.importorskip(framework)
    wrapped, over_mcp = (judge(spec, "tool_error") for spec in PAIRS[framework])
    assert over_mcp.verdict == judge(EXPLAINED[framework], "tool_error").verdict == "pass"
    assert wrapped.verdict == "fail"


@pytest.mark.parametrize("module", ["agents_sdk_mcp", "pydantic_ai_mcp", "langgraph_mcp", "plain_mcp"])
def test_the_docs_show_the_shipped_mcp_adapters_as_they_are(module: str) -> None:
    source = (ROOT / f"exitkit/adapters/{module}.py").read_text()
    assert source[source.index("class "):] in (ROOT / "docs/exitkit.md").read_text()
    assert len(source.splitlines()) <= 40 and len(source[source.index("class "):].splitlines()) <= 30


def test_the_kits_sources_hold_no_unresolved_merge() -> None:
    # A conflict left inside a docstring still imports: only reading the text finds it.
    marked = [f"{path.relative_to(ROOT)}:{n}" for folder in ("exitkit", "node-agents", "experiments/peers")
              for path in sorted((ROOT / folder).rglob("*")) if path.suffix in (".py", ".mjs", ".md")
              and "node_modules" not in path.parts
              for n, line in enumerate(path.read_text().splitlines(), 1)
              if re.match(r"(<{7}|={7}|>{7})( |$)", line)]
    assert marked == []
