"""Tools given in code: a tool whose answer a Python function makes, served beside scripted ones.

    async def lookup(request: ToolRequest) -> str:
        await request.progress(1, 2, "asking the warehouse")
        return f"order {request.arguments['id']}: shipped"

    create_app(mcp_tools=[CallableTool(name="lookup", call=lookup)])

The function may return a text (one text block), a `CallToolResult` as MCP spells it
(`{"content": [...], "isError": true}`), or a `Step` (any scripted answer: a JSON-RPC error, a
hang, a drop, progress, an expiring session), and is cancelled like a scripted tool when the
client sends `notifications/cancelled`. `request.effect()` records its side effect in the ledger
and the journal, as a scripted tool's `effect` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mockprovider.mcp.ledger import Ledger
from mockprovider.scripts.mcp_tools import Step

Answer = str | Mapping[str, Any] | Step
"""What a tool function returns."""


@dataclass(frozen=True, kw_only=True)
class ToolRequest:
    """One call of a tool given in code."""

    name: str
    arguments: Mapping[str, Any]
    index: int
    """0-based: how many calls of this tool the server answered before this one."""
    key: str | None
    """The idempotency key the client sent (`_meta.idempotencyKey`), if any."""
    session: str | None
    """The MCP session (None over stdio)."""
    progress: Callable[[float, float | None, str | None], Awaitable[None]]
    """`await request.progress(done, total, message)`: a `notifications/progress`, when the client
    asked for progress (sent a progress token); else nothing."""
    effect: Callable[[], None]
    """Record that this call ran the tool's side effect (the ledger, the journal)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class CallableTool:
    """A tool answered by `call`. Compared by identity: the server counts each tool's calls."""

    name: str
    call: Callable[[ToolRequest], Awaitable[Answer]]
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    annotations: Mapping[str, Any] | None = None
    """MCP's hints (`readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`)."""

    @property
    def definition(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "inputSchema": dict(self.input_schema)}
        if self.description:
            out["description"] = self.description
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@dataclass(frozen=True, kw_only=True)
class McpOptions:
    """A server's MCP settings beside the scenario files' scripts."""

    tools: tuple[CallableTool, ...] = ()
    """Tools given in code, served at every MCP endpoint of the server."""
    ledger: Ledger | None = None
    """Where effects are recorded across processes; None: in the journal only."""
    page_size: int = 100
    """How many tools, resources or prompts one list page holds."""

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= 10_000:
            raise ValueError(f"an MCP list page holds 1 to 10000 items, got page_size={self.page_size}")
        names = [tool.name for tool in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"two tools given in code share a name: {sorted(names)}")
