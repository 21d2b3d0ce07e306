"""The tap on one HTTP exchange with the MCP server: the journal's view of it, and its faults.

It journals the client's message when it arrives and each message the server sends back, in
the order they cross the wire: a JSON body, or each event of the SSE stream a POST opens
(progress notifications, then the answer). It re-frames that stream event by event, so it can
act on the answer to a call whose step said `drop` (never sent: the response stays unfinished
and the server closes the connection, as a crash mid-answer would) or `expire` (the session is
ended first, then the answer is sent: the client's next request meets 404).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.types import Message, Send

from mockprovider.mcp.host import TEST, McpHost, Where

EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
"""Where an SSE event ends: a blank line, in any of the three line endings SSE allows."""
LINE_END = re.compile(rb"\r\n|\n|\r")
SESSION_HEADER = "mcp-session-id"


class Tap:
    """One request's journal entries and its answer's fate; `send` goes where the SDK would send."""

    def __init__(self, host: McpHost, where: Where, method: str, message: Any, send: Send,
                 end_session: Callable[[str], Awaitable[None]]) -> None:
        self.host, self.where, self.method, self._send = host, where, method, send
        self.end_session = end_session
        params = message.get("params") if isinstance(message, dict) else None
        self.call_id = message.get("id") if isinstance(message, dict) and "method" in message else None
        self.flight = None if self.call_id is None or where.session is None else (
            where.session, flight_key(self.call_id))
        """The request's place in `McpHost.in_flight` until its answer goes out (none before the
        session exists: every client's `initialize` may take the same id)."""
        self.tool = None
        if isinstance(message, dict) and message.get("method") == "tools/call" and isinstance(params, dict):
            self.tool = params.get("name") if isinstance(params.get("name"), str) else None
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.sse = False
        self.buffer = b""
        self.lost = False
        """The answer was dropped: nothing more is sent, and the response is never finished."""

    def arrived(self, headers: Mapping[str, str], body: bytes) -> None:
        journal = self.host.settings().journal
        if journal is not None:
            journal.record_raw(method=self.method, path=self.where.path, headers=headers, raw=body or b"null",
                               kind="mcp", direction="in", session=self.where.session, tool=self.tool,
                               test_id=TEST.get())

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                            for k, v in message.get("headers", [])}
            self.sse = self.headers.get("content-type", "").startswith("text/event-stream")
            if self.where.session is None and self.status < 400 and SESSION_HEADER in self.headers:
                self.where = Where(path=self.where.path, selection=self.where.selection,
                                   session=self.headers[SESSION_HEADER])
                self.host.sessions.add(self.headers[SESSION_HEADER])
            if self.where.session is not None and (self.method == "DELETE" or self.status == 404):
                self.host.sessions.discard(self.where.session)  # ended, by its client or the SDK
            await self._send(message)
            return
        if message["type"] != "http.response.body":
            await self._send(message)
            return
        self.buffer += message.get("body", b"")
        more = message.get("more_body", False)
        if self.sse:
            await self._events(final=not more)
        elif not more:
            if self.buffer:
                self._journal(self.buffer)
                await self._answered(self.buffer)
            await self._send({"type": "http.response.body", "body": self.buffer, "more_body": False})
            self.buffer = b""
        if not more and self.sse and not self.lost:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _events(self, *, final: bool) -> None:
        while (end := EVENT_END.search(self.buffer)) is not None or (final and self.buffer):
            cut = end.end() if end is not None else len(self.buffer)
            event, self.buffer = self.buffer[:cut], self.buffer[cut:]
            data = _data(event)
            if data is not None:
                self._journal(data)
                await self._answered(data)
            if not self.lost:
                await self._send({"type": "http.response.body", "body": event, "more_body": True})

    async def _answered(self, data: bytes) -> None:
        """On the answer to this request: its id is free again; drop the answer to a `drop` step's
        call; end an `expire` step's session before its answer goes out."""
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not (isinstance(message, dict) and "id" in message and {"result", "error"} & message.keys()):
            return
        self.host.in_flight.discard(self.flight)
        fault = self.host.faults.pop((self.where.session, message["id"]), None)
        if fault == "drop":
            self.lost = True
            self.host.note(self.where, "dropped", tool=self.tool, id=message["id"])
        elif fault == "expire" and self.where.session is not None:
            # Before the answer goes out: a client quick to send its next request still meets 404.
            await self.end_session(self.where.session)
            self.host.note(self.where, "expired", tool=self.tool, id=message["id"])

    def _journal(self, raw: bytes) -> None:
        journal = self.host.settings().journal
        if journal is not None:
            journal.record_raw(method=self.method, path=self.where.path, headers=self.headers, raw=raw,
                               kind="mcp", direction="out", session=self.where.session, tool=self.tool,
                               status=self.status, test_id=TEST.get())


def flight_key(request_id: Any) -> Any:
    """A JSON-RPC id as a set key: 1 and "1" are two ids, and so are 1 and true."""
    return (type(request_id).__name__, request_id)


def _data(event: bytes) -> bytes | None:
    """The `data` of one SSE event (its lines joined by newlines), or None for a comment or ping."""
    lines = [line[5:].removeprefix(b" ") for line in LINE_END.split(event) if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None
