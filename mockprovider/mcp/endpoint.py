"""The routes the mock mounts: `/mcp` (every scenario's tools) and `/mcp/{scenario}` (one's), also
behind a base-URL options prefix (`/o/test=ID/mcp`: a shared mock's test, as `mock_llm_shared`'s
`mcp_url` names it).

Light on purpose: the MCP SDK takes most of a second to import, so it is imported on the first
MCP request, never by a mock that is only asked for completions.
"""

from __future__ import annotations

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mockprovider.errors import APIError
from mockprovider.mcp.host import TEST, McpHost

SDK = ("mcp", "mcp_types")
MISSING = "The MCP server needs the official `mcp` SDK: pip install 'harness-lab[mcp]'."

STATE = "mcp"
"""`app.state.mcp`: the app's `McpHost`, set by `create_app`."""


class McpEndpoint:
    """The ASGI app behind both routes: the app's MCP server over Streamable HTTP."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            from mockprovider.mcp.http import serve
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in SDK:
                raise
            await APIError(501, MISSING, type="not_implemented", code="mcp_not_installed").response()(
                scope, receive, send)
            return

        host: McpHost = getattr(scope["app"].state, STATE)
        TEST.set(host.test_of(scope))
        await serve(host, scope, receive, send)


ENDPOINT = McpEndpoint()
ROUTES = [Route("/mcp", ENDPOINT), Route("/mcp/{scenario}", ENDPOINT),
          Route("/o/{options}/mcp", ENDPOINT), Route("/o/{options}/mcp/{scenario}", ENDPOINT)]
