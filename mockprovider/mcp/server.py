"""The MCP server itself: the official SDK's low-level `Server`, its handlers reading the scripts.

The SDK owns the protocol (JSON-RPC, the `initialize` handshake and version negotiation,
`ping`, cancellation, progress tokens, the errors for unknown methods and malformed params);
these handlers only look names up in the endpoint's `Catalog`, page the lists, and answer a
`tools/call` with its scripted step (`mcp.steps`). The errors they raise are the ones
revision 2025-11-25 names: -32602 for an unknown tool, prompt or cursor, -32002 for an
unknown resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mockprovider.mcp import steps
from mockprovider.mcp.catalog import Catalog, UnknownName
from mockprovider.mcp.host import McpHost
from mockprovider.mcp.steps import where

Context = ServerRequestContext[Any, Any]
RESOURCE_NOT_FOUND = -32002
"""Revision 2025-11-25's code for a `resources/read` of a URI the server does not have."""
MAX_CURSOR = 20


def _catalog(host: McpHost, ctx: Context) -> Catalog:
    try:
        return host.catalog(where(ctx).selection)
    except UnknownName as e:
        raise MCPError(INVALID_PARAMS, str(e)) from None


Page = tuple[list[dict[str, Any]], str | None]


def _page(items: Sequence[dict[str, Any]], cursor: str | None, size: int) -> Page:
    """One page of `items` from `cursor` (an offset, opaque to the client), and the next cursor."""
    start = 0
    if cursor is not None:
        if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= MAX_CURSOR
                and int(cursor) <= len(items)):
            raise MCPError(INVALID_PARAMS, f"Invalid cursor: {cursor[:40]!r} is not one this server gave")
        start = int(cursor)
    end = start + size
    return list(items[start:end]), (str(end) if end < len(items) else None)


def build(host: McpHost, *, version: str) -> Server[Any]:
    """The SDK server answering from `host`'s scripts."""

    def lister(kind: str) -> Any:
        """The handler of `<kind>/list`: one page of the endpoint's tools, resources or prompts."""

        async def listing(ctx: Context, params: types.PaginatedRequestParams | None) -> Any:
            items = [item.definition for item in getattr(_catalog(host, ctx), kind).values()]
            page, next_cursor = _page(items, params.cursor if params else None, host.options().page_size)
            return {kind: page, **({"nextCursor": next_cursor} if next_cursor is not None else {})}

        return listing

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> Any:
        catalog = _catalog(host, ctx)
        try:
            tool = catalog.tool(params.name)
        except UnknownName as e:
            raise MCPError(INVALID_PARAMS, str(e)) from None
        key = _idempotency_key(params.meta)
        call = host.admit(tool, params.name, params.arguments, key)
        return await steps.answer(host, ctx, tool, call, scenario=catalog.owners.get(params.name))

    async def read_resource(ctx: Context, params: types.ReadResourceRequestParams) -> Any:
        try:
            resource = _catalog(host, ctx).resource(str(params.uri))
        except UnknownName as e:
            raise MCPError(RESOURCE_NOT_FOUND, "Resource not found",
                           {"uri": str(params.uri), "why": str(e)}) from None
        return {"contents": [resource.contents]}

    async def get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> Any:
        try:
            prompt = _catalog(host, ctx).prompt(params.name)
            messages = prompt.render(params.arguments or {})
        except (UnknownName, ValueError) as e:
            raise MCPError(INVALID_PARAMS, str(e)) from None
        out: dict[str, Any] = {"messages": messages}
        if "description" in prompt.definition:
            out["description"] = prompt.definition["description"]
        return out

    server: Server[Any] = Server(
        "mockprovider", version=version, title="The mock's scripted MCP server",
        on_list_tools=lister("tools"), on_call_tool=call_tool, on_list_resources=lister("resources"),
        on_read_resource=read_resource, on_list_prompts=lister("prompts"), on_get_prompt=get_prompt,
    )
    server.middleware = []  # the SDK's default OpenTelemetry span per message: no exporter here to feed
    return server


def _idempotency_key(meta: Mapping[str, Any] | None) -> str | None:
    key = meta.get("idempotencyKey") if meta else None
    return key if isinstance(key, str) else None
