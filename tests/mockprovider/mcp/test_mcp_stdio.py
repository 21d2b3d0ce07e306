"""`python -m mockprovider mcp`: the same server over stdio, driven by the official Python client,
each client starting its own server process, the ledger counting effects across them.

A server process takes a second or more to start (the SDK's import): the fault cases, a process
or two each, run with the slow suite."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_support import TOOLBOX

from mockprovider.mcp.ledger import Ledger


@pytest.fixture
def toolbox(tmp_path: Path) -> Path:
    path = tmp_path / "toolbox.json"
    path.write_text(json.dumps(TOOLBOX))
    return path


def server(*args: str) -> StdioServerParameters:
    # The child imports this worktree's packages, as the test process does.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return StdioServerParameters(command=sys.executable, args=["-m", "mockprovider", "mcp", *args], env=env)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_the_python_client_lists_and_calls_the_scripted_tools_over_stdio(toolbox: Path):
    async def main() -> tuple[Any, ...]:
        async with Client(server("--scenarios", str(toolbox), "--page-size", "4"), mode="legacy") as client:
            page = await client.list_tools()
            seen: list[float] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                seen.append(done)

            scanned = await client.call_tool("scan", {}, progress_callback=progress)
            refused = await client.call_tool("read_file", {"path": "timeout.log"})
            with pytest.raises(MCPError) as failed:
                await client.call_tool("read_file", {"path": "elsewhere"})
            prompt = await client.get_prompt("triage", {"file": "a.log"})
            return client.protocol_version, page, scanned, seen, refused, failed.value.error, prompt

    version, page, scanned, seen, refused, failed, prompt = run(main())
    assert version == "2025-11-25"
    assert [t.name for t in page.tools] == ["read_file", "scan", "stuck", "delete_file"]
    assert page.next_cursor == "4"
    assert scanned.content[0].text == "scanned 1200 files" and seen == [400, 1200]
    assert refused.is_error and failed.code == -32603
    assert prompt.messages[0].content.text == "Find the errors in a.log."


@pytest.mark.slow
def test_a_hang_stops_on_cancellation_over_stdio_too(toolbox: Path):
    async def main() -> str:
        import anyio

        async with Client(server("--scenarios", str(toolbox)), mode="legacy") as client:
            with anyio.move_on_after(0.5) as waited:
                await client.call_tool("stuck", {})
            assert waited.cancelled_caught
            return (await client.call_tool("scan", {})).content[0].text

    assert run(main()) == "scanned 1200 files"


@pytest.mark.slow
def test_effects_are_counted_across_server_processes_and_a_drop_ends_the_process(toolbox: Path,
                                                                                  tmp_path: Path):
    ledger = tmp_path / "ledger"
    command = server("--scenarios", str(toolbox), "--ledger", str(ledger))

    async def one_process() -> str:
        async with Client(command, mode="legacy") as client:
            with pytest.raises(MCPError) as lost:  # call 0 of this process drops: the server exits
                await client.call_tool("delete_file", {"path": "access.log"},
                                       meta={"idempotencyKey": "run-1"})
            return lost.value.error.message

    assert "Connection closed" in run(one_process())
    assert "Connection closed" in run(one_process())  # a new process counts its calls afresh
    effects = Ledger(ledger).effects("delete_file")
    assert len(effects) == 2
    assert {e.key for e in effects} == {"run-1"} and {e.session for e in effects} == {None}
    assert Ledger(ledger).count("delete_file", {"path": "access.log"}, key="run-1") == 2


@pytest.mark.slow
def test_an_expire_step_answers_then_ends_the_process(toolbox: Path):
    async def main() -> tuple[str, str]:
        command = server("--scenarios", str(toolbox), "--scenario", "toolbox")
        async with Client(command, mode="legacy") as client:
            await client.list_tools()
            first = (await client.call_tool("short_lived", {})).content[0].text
            with pytest.raises(MCPError) as gone:
                await client.call_tool("short_lived", {})
            return first, gone.value.error.message

    assert run(main()) == ("first", "Connection closed")


def test_the_command_refuses_bad_files_and_names_with_one_line(toolbox: Path, tmp_path: Path):
    def refused(*args: str) -> str:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run([sys.executable, "-m", "mockprovider", "mcp", *args], capture_output=True,
                              text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
        assert done.returncode != 0
        return done.stderr.strip().splitlines()[-1]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad", "turns": [{"content": "x"}],
                               "mcp": {"tools": [{"name": "t"}]}}))
    assert refused("--scenarios", str(bad)) == (
        f"mockprovider mcp: {bad}: $.mcp.tools[0]: missing the required key 'calls'")
    missing = refused("--scenarios", str(toolbox), "--scenario", "nope")
    assert "--scenario nope: no scenario of that name" in missing
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"name": "plain", "turns": [{"content": "x"}]}))
    assert "none of the scenario files has an 'mcp' section" in refused("--scenarios", str(plain))


def test_lines_that_are_no_json_rpc_message_get_json_rpc_errors_and_the_server_serves_on(toolbox: Path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "mockprovider", "mcp", "--scenarios", str(toolbox)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, env=env) as server:
        def ask(line: str) -> dict:
            server.stdin.write(line + "\n")
            server.stdin.flush()
            return json.loads(server.stdout.readline())

        opened = ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}))
        assert opened["result"]["protocolVersion"] == "2025-06-18"
        server.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        parse_error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        assert ask("{not json") == parse_error
        assert ask('[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]')["error"]["code"] == -32600
        assert ask('{"jsonrpc": "2.0", "id": 3, "method": "nothing/here"}')["error"]["code"] == -32601
        pong = ask('{"jsonrpc": "2.0", "id": 4, "method": "ping"}')
        assert pong == {"jsonrpc": "2.0", "id": 4, "result": {}}
        server.stdin.close()
        assert server.wait(timeout=30) == 0
