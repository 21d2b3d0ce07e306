"""The kit's tools over MCP: the same `job.tools`, served by the mock's MCP server from the run's
own process, so an adapter may hand `job.mcp_url` to its framework's MCP client.

The server runs in the agent's process (on a thread of its own, on a loopback port), so a tool
called over MCP runs where a wrapped one runs: its ledger lines carry the same pid, a crash after
its effect kills the same process, and a cancellation of the call cancels the tool's task, which
the ledger records as `cancelled` as it does for a wrapped call the framework cancels. A tool that
raises answers `isError: true` with the error's text (what the SDKs' own tool wrappers hand the
model). A command adapter's tools are served the same way from the kit's own process
(`exitkit.command`), since its process may be in any language.

Given the run's ledger, the server also writes there how each call arrived and what stopped a
cancelled one: `called over MCP`, then `cancelled over MCP` with the detail `notifications/cancelled`
(the client named the call in one) or `connection closed` (no notification named it: the client
ended its session, and the server cancelled the call with it). A request whose connection the
client only drops is no cancellation (the spec says so): its call runs on to its end.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from exitkit.contract import Tool
from exitkit.ledger import Event, Ledger

MCP = "mcp"
"""An adapter with `tools = "mcp"` gets `job.mcp_url` (and should call the tools there)."""
CALLED, CANCELLED = "called over MCP", "cancelled over MCP"
NOTIFIED, CLOSED, NEVER = "notifications/cancelled", "connection closed", "never"
JOURNALLED = 500
"""Messages the server keeps to tell a notified cancellation from a closed connection; the one it
looks for arrives just before the call it names is cancelled."""

Heard = Callable[[str | None, str], bool]
"""Whether a `notifications/cancelled` in a session named a call of a tool."""


class Calls:
    """How many calls the server is running, for the run's thread to wait on: a cancellation the
    client sent as its run ended reaches the tool on the server's thread a moment later, and the
    run's process must not end before it does (a server elsewhere would go on)."""

    def __init__(self) -> None:
        self._running = 0
        self._changed = threading.Condition()

    @contextmanager
    def one(self) -> Iterator[None]:
        with self._changed:
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def settled(self, timeout_s: float) -> bool:
        """Whether every call ended within `timeout_s` (blocks the calling thread)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._running == 0, timeout_s)


def _callable(tool: Tool, ledger: Ledger | None, notified: Heard, calls: Calls) -> Any:
    from mockprovider.mcp.callable import CallableTool, ToolRequest

    async def call(request: ToolRequest) -> Any:
        with calls.one():
            return await _answer(request)

    async def _answer(request: ToolRequest) -> Any:
        if ledger is not None:
            ledger.note(tool.name, CALLED, dict(request.arguments))
        try:
            return await tool.call(**request.arguments)
        except asyncio.CancelledError:
            if ledger is not None:
                how = NOTIFIED if notified(request.session, tool.name) else CLOSED
                ledger.note(tool.name, CANCELLED, dict(request.arguments), how)
            raise
        except Exception as e:  # what the model sees of a failed wrapped call, as an MCP tool error
            return {"content": [{"type": "text", "text": str(e)}], "isError": True}

    return CallableTool(name=tool.name, call=call, description=tool.description,
                        input_schema=tool.parameters,
                        annotations={"readOnlyHint": tool.read_only, "destructiveHint": not tool.read_only})


def _notified(entries: Callable[[], list[Any]]) -> Heard:
    def heard(session: str | None, tool: str) -> bool:
        ids, named = set(), set()
        for e in entries():
            body = e.body if e.kind == MCP and e.direction == "in" and e.session == session else None
            if not isinstance(body, dict) or not isinstance(params := body.get("params"), dict):
                continue
            if body.get("method") == "tools/call" and params.get("name") == tool:
                ids.add(repr(body.get("id")))
            elif body.get("method") == "notifications/cancelled":
                named.add(repr(params.get("requestId")))
        return bool(ids & named)

    return heard


@contextmanager
def served(tools: tuple[Tool, ...], ledger: Ledger | None = None,
           calls: Calls | None = None) -> Iterator[str]:
    """`tools` at an MCP Streamable HTTP URL on 127.0.0.1 while the block runs; with `ledger`,
    how each call arrived and what cancelled it is written there too; `calls` counts the calls
    running."""
    from mockprovider.app import create_app
    from mockprovider.server import serve_in_thread

    app: Any = None
    notified = _notified(lambda: app.state.config.journal.entries())
    app = create_app(mcp_tools=[_callable(t, ledger, notified, calls or Calls()) for t in tools],
                     journal=JOURNALLED if ledger is not None else 0)
    with serve_in_thread(app) as base_url:
        yield base_url.removesuffix("/v1") + "/mcp"


def cancel_reached(events: list[Event], tool: str) -> str | None:
    """How a cancellation reached `tool` called over MCP (`NOTIFIED`, `CLOSED`, or `NEVER`: it
    was never cancelled); None when no call of it came over MCP."""
    if not any(e.is_(tool, CALLED) for e in events):
        return None
    return next((e.detail for e in events if e.is_(tool, CANCELLED)), NEVER)
