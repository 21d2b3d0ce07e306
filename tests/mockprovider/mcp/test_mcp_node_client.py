"""The official Node MCP client (`@modelcontextprotocol/sdk`, tests/node), unchanged, over
Streamable HTTP and stdio: `make test` installs it from tests/node/package-lock.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import TOOLBOX, served

from mockprovider.mcp.calls import tool_calls

NODE = Path(__file__).resolve().parents[2] / "node"
CLIENT = NODE / "mcp_client.mjs"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(),
    reason="the Node MCP client is not installed: `make test` installs it (npm ci in tests/node)",
)
PLAN = [
    {"op": "tools"},
    {"op": "call", "name": "scan"},
    {"op": "call", "name": "read_file", "arguments": {"path": "timeout.log"}},
    {"op": "call", "name": "read_file", "arguments": {"path": "elsewhere"}},
    {"op": "call", "name": "stuck", "abortAfterMs": 300},
    {"op": "ping"},
    {"op": "call", "name": "no_such_tool"},
    {"op": "resources"},
    {"op": "read", "uri": "file:///notes.txt"},
    {"op": "prompt", "name": "triage", "arguments": {"file": "a.log"}},
]


def node(mode: str, target: str, plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(["node", str(CLIENT), mode, target, json.dumps(plan)], capture_output=True,
                          text=True, timeout=120, cwd=NODE, env=env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["op"] == "connected" and lines[0]["value"]["name"] == "mockprovider"
    return lines[1:]


def check(steps: list[dict[str, Any]], page_size: int) -> None:
    names = [t["name"] for t in TOOLBOX["mcp"]["tools"]]
    tools, scan, refused, failed, stopped, ping, unknown, resources, read, prompt = steps
    assert tools["value"] == [names[i:i + page_size] for i in range(0, len(names), page_size)]
    assert scan["value"]["result"]["content"][0]["text"] == "scanned 1200 files"
    # The Node client hands a notification to its handler a microtask later, but settles a response at
    # once (dropping the call's progress handler): a last notification read in the same chunk as the
    # answer is lost on the client's side. The first always arrives; any others arrive in order.
    progress = [p["progress"] for p in scan["value"]["progress"]]
    assert progress and progress == [400, 1200][: len(progress)]
    assert refused["value"]["result"]["isError"] is True
    assert (failed["ok"], failed["code"]) == (False, -32603)
    assert not stopped["ok"] and "user pressed Stop" in stopped["error"]
    assert ping == {"op": "ping", "ok": True, "value": {}}
    assert (unknown["ok"], unknown["code"]) == (False, -32602)
    assert resources["value"][0]["uri"] == "file:///notes.txt"
    assert read["value"][0]["text"] == "Remember to rotate your logs."
    assert prompt["value"][0]["content"]["text"] == "Find the errors in a.log."


def test_the_node_client_over_streamable_http_and_its_abort_reaches_the_hanging_tool():
    with served(mcp_page_size=3) as mock:
        check(node("http", mock.mcp_url, PLAN), page_size=3)
        journal = mock.app.state.config.journal.entries()
    (stuck,) = tool_calls(journal, "stuck")
    assert stuck.outcome == "cancelled"
    cancelled = [e.body for e in journal if e.direction == "in" and isinstance(e.body, dict)
                 and e.body.get("method") == "notifications/cancelled"]
    assert cancelled == [{"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": stuck.id, "reason": "user pressed Stop"}}]
    notes = [e.body for e in journal if e.direction == "note"]
    assert {"event": "stopped", "tool": "stuck", "id": stuck.id, "index": 0} in notes


@pytest.mark.slow
def test_the_node_client_over_stdio(tmp_path: Path):
    scenario = tmp_path / "toolbox.json"
    scenario.write_text(json.dumps(TOOLBOX))
    command = [sys.executable, "-m", "mockprovider", "mcp", "--scenarios", str(scenario), "--page-size", "5"]
    check(node("stdio", json.dumps(command), PLAN), page_size=5)
