"""The MCP server over Streamable HTTP: the SDK's session manager, behind a tap.

The SDK's `StreamableHTTPSessionManager` owns the transport: sessions (`Mcp-Session-Id`, 404 for
an unknown or ended one, 400 for a request without one before `initialize`), the SSE stream of
each POST, parse errors, oversized bodies (413). It needs a task group that outlives requests:
it is started on the first request, in a task of the server's event loop, which ends with the
loop (uvicorn's `asyncio.run` cancels it), so the mock needs no lifespan to serve MCP.

The tap around it does what the SDK leaves to the application:
- it journals every message, both ways, in wire order, with its session and tool
  (`mcp.tap`), beside the model's requests;
- it answers a request for another protocol era (a 2026-07-28 `server/discover` probe) the way a
  2025-11-25 server does, with 400, so an "auto" client falls back to `initialize`, and a
  message that is JSON but no JSON-RPC message with -32600, as JSON-RPC prescribes;
- it loses a `drop` step's answer with the connection, and ends an `expire` step's session
  once its answer is sent (`McpHost.faults`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from functools import partial
from importlib import metadata
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware, TransportSecuritySettings
from mcp_types import (
    INVALID_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from mockprovider.mcp import server
from mockprovider.mcp.catalog import UnknownName
from mockprovider.mcp.host import McpHost, Where
from mockprovider.mcp.tap import Tap
from mockprovider.off_loop import FULL_COLLECTIONS_WAIT
from mockprovider.offload import LARGE_BYTES, parse_yielding

VERSION_HEADER = "mcp-protocol-version"
SESSION_HEADER = "mcp-session-id"


class HttpTransport:
    """One app's SDK server and session manager, started on the first request of an event loop."""

    def __init__(self, host: McpHost) -> None:
        self.host = host
        try:
            version = metadata.version("harness-lab")
        except metadata.PackageNotFoundError:
            version = "0"
        self.server = server.build(host, version=version)
        self.manager: StreamableHTTPSessionManager | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def running(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A manager runs once, in one loop: an app served again in another loop gets a new one.
            self._loop, self._ready, self.manager = loop, asyncio.Event(), None
            manager = StreamableHTTPSessionManager(
                app=self.server, json_response=False, stateless=False,
                # The mock answers any Host on every endpoint (a container, a tunnel); its tools
                # run nothing but their scripts.
                security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            self._task = loop.create_task(self._run(manager))
        await self._ready.wait()
        if self.manager is None:
            raise RuntimeError("the MCP session manager did not start (its error is in the log)")
        return self.manager

    async def _run(self, manager: StreamableHTTPSessionManager) -> None:
        try:
            async with manager.run():
                self.manager = manager
                self._ready.set()
                try:
                    await anyio.sleep_forever()
                finally:
                    # The loop is ending: end the sessions as their clients would, so each closes
                    # its streams and answers what it still holds, before the manager cancels them.
                    with anyio.CancelScope(shield=True):
                        for session in list(self.host.sessions):
                            await self.end(session)
        finally:
            self._ready.set()  # a manager that failed to start must not leave requests waiting

    async def end(self, session: str) -> None:
        """End `session` as its client would, with a DELETE: from now on its id answers 404."""
        assert self.manager is not None
        scope = {"type": "http", "method": "DELETE", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"",
                 "headers": [(b"mcp-session-id", session.encode("latin-1"))], "http_version": "1.1",
                 "scheme": "http", "server": None, "client": None, "root_path": ""}

        async def nothing() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        await self.manager.handle_request(scope, nothing, discard)
        self.host.sessions.discard(session)


async def serve(host: McpHost, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one HTTP request to `/mcp` or `/mcp/{scenario}`."""
    if scope["type"] != "http":
        return
    if host.http is None:
        host.http = HttpTransport(host)
    limit = host.settings().max_body_bytes
    await RequestBodyLimitMiddleware(partial(_exchange, host), limit)(scope, receive, send)


async def _exchange(host: McpHost, scope: Scope, receive: Receive, send: Send) -> None:
    """One request, journalled both ways (its body arrives whole: the size limit read it first)."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return  # the client left before its body arrived
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    body = b"".join(chunks)
    if len(body) <= LARGE_BYTES:
        await _answer(host, scope, body, _read(body, scope["method"]), receive, send)
        return
    # A large body's own parse and check on a thread, letting the loop in as they go; the SDK's
    # parse stays on the loop its sessions run on, with the collector's full passes held.
    with FULL_COLLECTIONS_WAIT:
        read = await asyncio.to_thread(_read, body, scope["method"], parse_yielding)
        await _answer(host, scope, body, read, receive, send)


async def _answer(host: McpHost, scope: Scope, body: bytes, read: tuple[Any, bool],
                  receive: Receive, send: Send) -> None:
    assert host.http is not None
    parsed, is_message = read
    headers = _headers(scope)
    where = Where(path=scope["path"], selection=scope.get("path_params", {}).get("scenario"),
                  session=headers.get(SESSION_HEADER))
    manager = await host.http.running()
    tap = Tap(host, where, scope["method"], parsed, send, host.http.end)
    tap.arrived(headers, body)
    refusal = _refusal(host, where, headers, parsed, is_message)
    if refusal is None and tap.flight is not None and tap.flight in host.in_flight:
        # MCP: an id is never reused in a session; the SDK would overwrite the first request's streams.
        refusal = _error(400, INVALID_REQUEST, f"Invalid Request: the id {json.dumps(parsed['id'])[:40]} is "
                         "already taken by a request in flight in this session")
    if refusal is not None:
        await refusal(scope, receive, tap.send)
        return
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    if tap.flight is not None:
        host.in_flight.add(tap.flight)
    try:
        await manager.handle_request(scope, replay, tap.send)
    finally:
        host.in_flight.discard(tap.flight)


def _refusal(host: McpHost, where: Where, headers: dict[str, str], parsed: Any,
             is_message: bool) -> Response | None:
    """What the tap answers itself: an unknown scenario, another era's request, a non-message."""
    if where.selection is not None:
        try:
            host.catalog(where.selection)
        except UnknownName as e:
            return _error(404, INVALID_REQUEST, f"Not Found: {e}")
    version = headers.get(VERSION_HEADER)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        supported = list(HANDSHAKE_PROTOCOL_VERSIONS)
        return _error(400, UNSUPPORTED_PROTOCOL_VERSION,
                      f"Bad Request: Unsupported protocol version: {version[:40]}; this server speaks "
                      f"{', '.join(supported)}", {"supported": supported, "requested": version[:40]})
    if parsed is not NOT_JSON and not is_message:
        return _error(400, INVALID_REQUEST,
                      "Invalid Request: the body is JSON but not one JSON-RPC 2.0 message")
    return None


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


NOT_JSON = object()


def _read(body: bytes, method: str, parse: Callable[[bytes], Any] = json.loads) -> tuple[Any, bool]:
    """The JSON of a POST body, or NOT_JSON (the SDK answers that one: -32700); and whether it is
    one JSON-RPC message."""
    if method != "POST":
        return NOT_JSON, False
    try:
        parsed = parse(body)
    except (ValueError, RecursionError):
        return NOT_JSON, False
    return parsed, isinstance(parsed, dict) and _is_message(parsed)


def _is_message(value: dict[str, Any]) -> bool:
    try:
        jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        return False
    return True


def _error(status: int, code: int, message: str, data: Any = None) -> Response:
    """A JSON-RPC error object with no id, as the SDK answers the transport's own refusals."""
    error = ErrorData(code=code, message=message, **({"data": data} if data is not None else {}))
    body = JSONRPCError(jsonrpc="2.0", id=None, error=error)
    return Response(body.model_dump_json(by_alias=True, exclude_unset=True), status_code=status,
                    media_type="application/json")
