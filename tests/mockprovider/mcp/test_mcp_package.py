"""The MCP package's room: a small public API, the SDK imported only when a client connects, and
imports that keep the mock's layers one-way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from source_support import parsed

import mockprovider.mcp

PACKAGE = Path(mockprovider.mcp.__file__).parent
SDK = {"mcp", "mcp_types"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_public_api_is_small_and_pinned():
    assert sorted(mockprovider.mcp.__all__) == [
        "CallableTool", "Effect", "Ledger", "McpOptions", "McpScript", "Step", "ToolCall", "ToolRequest",
        "tool_calls"]


def test_a_mock_asked_only_for_completions_never_imports_the_sdk():
    code = ("import sys, mockprovider.app, mockprovider.scripts.files, mockprovider.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_what_a_scenario_file_loads_is_free_of_the_sdk_and_the_package_never_reaches_up():
    light = [PACKAGE / name for name in ("__init__.py", "catalog.py", "host.py", "callable.py", "ledger.py",
                                         "calls.py", "endpoint.py")]
    light += sorted(PACKAGE.parent.glob("scripts/mcp_*.py"))
    assert len(light) == 10
    for path in light:
        tops = {n.split(".")[0] for n in imported(path)}
        assert not tops & SDK, path.name
    above = {"mockprovider.app", "mockprovider.apis", "mockprovider.replies", "mockprovider.reading",
             "mockprovider.recorder", "harness", "exitkit", "experiments"}
    for path in PACKAGE.glob("*.py"):
        reached = {n for n in imported(path) if any(n == a or n.startswith(a + ".") for a in above)}
        assert not reached, path.name


def test_without_the_sdk_the_mcp_route_answers_501_naming_the_extra(monkeypatch):
    from starlette.testclient import TestClient

    from mockprovider.app import create_app

    for name in [m for m in sys.modules if m.split(".")[0] in SDK or m == "mockprovider.mcp.http"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an install without the `mcp` extra has
    with TestClient(create_app()) as client:
        answer = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        health = client.get("/healthz")
    assert answer.status_code == 501 and "harness-lab[mcp]" in answer.json()["error"]["message"]
    assert health.status_code == 200
