"""Scenario files with MCP tools, a mock serving them, and a raw Streamable HTTP session.

The raw session (`RawSession`) is for what no real client sends (bad input, other eras);
everything a client does is tested with the real clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette

from mockprovider.app import create_app
from mockprovider.server import serve_in_thread

ACCEPT = "application/json, text/event-stream"
READ_FILE = {
    "name": "read_file", "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    "calls": [[
        {"if": {"arguments_include": {"path": "timeout.log"}}, "is_error": True,
         "text": "no such file: timeout.log. Call list_files to see what exists."},
        {"if": {"arguments_contain": "errors.log"}, "text": "worker 7 timed out after 30000 ms"},
        {"error": {"code": -32603, "message": "the disk is on fire", "data": {"disk": 0}}},
    ]],
    "after_last": "repeat",
}
TOOLBOX = {
    "name": "toolbox",
    "description": "Answers in text; its MCP server scripts every kind of tool answer.",
    "turns": [{"content": "Nothing to do."}],
    "after_last": "repeat",
    "mcp": {
        "tools": [
            READ_FILE,
            {"name": "scan", "calls": [{"text": "scanned 1200 files", "progress_interval": 10,
                                        "progress": [{"progress": 400, "total": 1200, "message": "a third"},
                                                     {"progress": 1200, "total": 1200}]}],
             "after_last": "repeat"},
            {"name": "stuck", "calls": [{"hang": True, "progress": [{"progress": 1}]}],
             "after_last": "repeat"},
            {"name": "delete_file", "effect": True,
             "annotations": {"destructiveHint": True},
             "calls": [{"drop": True}, {"text": "deleted"}], "after_last": "repeat"},
            {"name": "short_lived", "calls": [{"text": "first", "expire": True}, {"text": "second"}],
             "after_last": "repeat"},
            {"name": "weather", "output_schema": {"type": "object", "properties": {"c": {"type": "number"}}},
             "calls": [{"structured": {"c": 21.5}}], "after_last": "repeat"},
            {"name": "once", "calls": [{"text": "only once"}]},
        ],
        "resources": [{"uri": "file:///notes.txt", "name": "notes", "mime_type": "text/plain",
                       "text": "Remember to rotate your logs."}],
        "prompts": [{"name": "triage", "description": "Find the errors.",
                     "arguments": [{"name": "file", "required": True}],
                     "messages": [{"role": "user", "text": "Find the errors in {file}."}]}],
    },
}


@dataclass(frozen=True)
class Served:
    app: Starlette
    root: str
    """`http://127.0.0.1:PORT`: the MCP server is at `root + "/mcp"`."""

    @property
    def mcp_url(self) -> str:
        return f"{self.root}/mcp"

    def entries(self, **where: Any) -> list[Any]:
        """The journal's entries whose attributes equal `where` (kind="mcp", direction="out", ...)."""
        return [e for e in self.app.state.config.journal.entries()
                if all(getattr(e, name) == value for name, value in where.items())]


@contextmanager
def served(*scenarios: dict[str, Any], **options: Any) -> Iterator[Served]:
    app = create_app(scenario_files=scenarios or [TOOLBOX], journal=10_000, **options)
    with serve_in_thread(app) as base_url:
        yield Served(app=app, root=base_url.removesuffix("/v1"))


def sse_messages(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of a response: its JSON body, or each `data:` of its SSE stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()] if response.content else []
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


class RawSession:
    """A Streamable HTTP session driven by hand: for what no real client sends."""

    def __init__(self, client: httpx.Client, url: str, version: str = "2025-11-25") -> None:
        self.client, self.url, self.next_id = client, url, 0
        opened = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
            session=False)
        self.initialized = sse_messages(opened)[0]
        self.id = opened.headers["mcp-session-id"]
        self.version = self.initialized["result"]["protocolVersion"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def headers(self, session: bool = True) -> dict[str, str]:
        out = {"accept": ACCEPT, "content-type": "application/json"}
        if session:
            out |= {"mcp-session-id": self.id, "mcp-protocol-version": self.version}
        return out

    def post(self, message: Any, *, session: bool = True, **extra: Any) -> httpx.Response:
        return self.client.post(self.url, json=message, headers=self.headers(session), **extra)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The answer to one request (the last message of its stream), under a fresh id."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params:
            message["params"] = params
        return sse_messages(self.post(message))[-1]
