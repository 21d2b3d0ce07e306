"""What carries Stop to a tool the kit serves over MCP, client by client: a `notifications/cancelled`
naming the call, the end of the client's session, or nothing (the ledger says which, and the
cancellation case shows it as "cancel reached the tool")."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from mcp import Client

from exitkit.mcp import CLOSED, NEVER, NOTIFIED, Calls, cancel_reached, served
from exitkit.runner import Kit
from exitkit.setup import Setup
from exitkit.verdict import Result

Judge = Callable[[str, str], Result]
NODE = Path(__file__).resolve().parents[1] / "node"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
A = "exitkit.adapters."


def _slow(folder: Path, seconds: float = 30.0) -> Setup:
    return Setup(base_url="", scenario="slow", folder=folder, scan_seconds=seconds).make()


async def _started(setup: Setup) -> None:
    while not setup.ledger.count("scan_archive"):  # noqa: ASYNC110 (another thread writes the file)
        await asyncio.sleep(0.01)


async def _until(setup: Setup, reached: str, within_s: float = 10.0) -> str | None:
    """What the ledger says reached the tool, once it says `reached` (or `within_s` has passed)."""
    for _ in range(int(within_s / 0.01)):
        if (got := cancel_reached(setup.ledger.events(), "scan_archive")) == reached:
            return got
        await asyncio.sleep(0.01)
    return cancel_reached(setup.ledger.events(), "scan_archive")


async def _raw_call(url: str, setup: Setup, *, end_session: bool) -> None:
    """A client that cancels the call by dropping its request, and maybe ends its session, without
    a notification (no SDK client does the first alone; an HTTP client that gives up does)."""
    async with httpx.AsyncClient(timeout=30) as http:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {},
                 "clientInfo": {"name": "raw", "version": "0"}}
        opened = await http.post(url, headers=HEADERS,
                                 json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        headers = HEADERS | {"mcp-session-id": opened.headers["mcp-session-id"],
                             "mcp-protocol-version": "2025-11-25"}
        await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "scan_archive",
                                                                               "arguments": {}}}

        async def answer() -> None:
            async with http.stream("POST", url, headers=headers, json=call) as response:
                async for _ in response.aiter_bytes():
                    pass

        waiting = asyncio.ensure_future(answer())
        await _started(setup)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        if end_session:
            assert (await http.delete(url, headers=headers)).status_code == 200


def test_a_session_ended_during_a_call_cancels_the_tool_and_the_ledger_says_the_connection_closed(
        tmp_path: Path) -> None:
    setup = _slow(tmp_path)
    with served(setup.job().tools, setup.ledger) as url:
        asyncio.run(_raw_call(url, setup, end_session=True))
        assert asyncio.run(_until(setup, CLOSED)) == CLOSED
    assert [e.event for e in setup.ledger.events()] == ["called over MCP", "start", "cancelled",
                                                        "cancelled over MCP"]


def test_a_dropped_request_alone_never_reaches_the_tool_which_runs_to_its_end(tmp_path: Path) -> None:
    setup = _slow(tmp_path, seconds=0.3)
    with served(setup.job().tools, setup.ledger) as url:
        asyncio.run(_raw_call(url, setup, end_session=False))
        for _ in range(1000):  # the tool runs on to its end, on the server's thread
            if setup.ledger.count("scan_archive", "ok"):
                break
            time.sleep(0.01)
    assert cancel_reached(setup.ledger.events(), "scan_archive") == NEVER


def test_the_mcp_sdk_client_sends_notifications_cancelled_when_its_call_is_cancelled(tmp_path: Path) -> None:
    setup = _slow(tmp_path)

    async def cancelled(url: str) -> str | None:
        async with Client(url) as client:  # held open: only the notification can reach the tool
            call = asyncio.ensure_future(client.call_tool("scan_archive", {}))
            await _started(setup)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            return await _until(setup, NOTIFIED)

    with served(setup.job().tools, setup.ledger) as url:
        assert asyncio.run(asyncio.wait_for(cancelled(url), 20)) == NOTIFIED


def test_no_call_over_mcp_leaves_nothing_to_say(tmp_path: Path) -> None:
    setup = _slow(tmp_path, seconds=0.01)
    asyncio.run(setup.job().tool("scan_archive").call())  # wrapped: called directly
    assert cancel_reached(setup.ledger.events(), "scan_archive") is None


NODE_MISSING = shutil.which("node") is None or not (NODE / "node_modules/@modelcontextprotocol/sdk").is_dir()


@pytest.mark.skipif(NODE_MISSING, reason="the Node MCP client is not installed: `make test` installs it "
                                         "(npm ci in tests/node)")
def test_the_node_sdk_client_sends_notifications_cancelled_when_its_request_is_aborted(
        tmp_path: Path) -> None:
    setup = _slow(tmp_path)
    plan = [{"op": "call", "name": "scan_archive", "abortAfterMs": 500}, {"op": "ping"}]
    with served(setup.job().tools, setup.ledger) as url:
        done = subprocess.run(["node", str(NODE / "mcp_client.mjs"), "http", url, json.dumps(plan)],
                              capture_output=True, text=True, timeout=60, cwd=NODE, env=dict(os.environ))
        assert done.returncode == 0, done.stderr
        aborted, ping = (json.loads(line) for line in done.stdout.splitlines()[1:])
        assert not aborted["ok"] and "user pressed Stop" in aborted["error"]
        assert ping["ok"]  # the session went on: only the notification could have stopped the tool
        assert asyncio.run(_until(setup, NOTIFIED)) == NOTIFIED
    assert setup.ledger.count("scan_archive", "ok") == 0


@pytest.mark.parametrize(("spec", "module"), [
    (f"{A}plain_mcp:PlainLoopOverMCP", "mcp"),
    (f"{A}agents_sdk_mcp:AgentsSDKOverMCP", "agents"),
    (f"{A}pydantic_ai_mcp:PydanticAIOverMCP", "pydantic_ai"),
])
def test_each_shipped_mcp_client_stops_the_kits_tool_with_notifications_cancelled(
        judge: Judge, spec: str, module: str) -> None:
    pytest.importorskip(module)
    result = judge(spec, "cancellation")
    assert result.verdict == "pass", result.summary
    assert result.figures["cancel reached the tool"] == NOTIFIED
    assert result.figures["tool saw it"] is True


def test_a_wrapped_tool_has_no_mcp_client_to_report(judge: Judge) -> None:
    result = judge(f"{A}plain:PlainLoop", "cancellation")
    assert result.verdict == "pass" and result.figures["cancel reached the tool"] is None




def test_a_cancellation_sent_as_the_run_returns_still_reaches_the_tool_before_its_process_ends(
        kit: Kit) -> None:
    # The server cancels the call on its own thread a moment after the client's message arrives;
    # the run's process waits for it (`Calls`), or the ledger would say the Stop never arrived.
    run = kit.measure("mcp_loop:StopsAndReturns", kit.setup("slow"), stop=("scan_archive", 0.2))
    assert run.outcome.status == "cancelled"
    assert cancel_reached(run.events, "scan_archive") == NOTIFIED


def test_the_running_calls_settle_when_the_last_one_ends_and_not_before() -> None:
    calls = Calls()
    with calls.one():
        assert calls.settled(0.01) is False
    assert calls.settled(0.01) is True
    running = calls.one()
    running.__enter__()
    threading.Timer(0.05, running.__exit__, (None, None, None)).start()
    assert calls.settled(5) is True
