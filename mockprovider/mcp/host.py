"""One server's MCP state: what it serves now, how many calls each tool answered, and its notes.

What is served is read from the server's settings at every call (a scenario table, a journal,
`McpOptions`), so a `mock_llm_shared` test that swaps its scenario files swaps the tools too,
and each set of scripts counts its own calls. The counts are the only state MCP adds to the
mock: a tool script's `calls[i]` is "the i-th call this server answered", across sessions.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mockprovider.mcp import catalog
from mockprovider.mcp.callable import McpOptions
from mockprovider.mcp.catalog import Catalog, Tool
from mockprovider.mcp.ledger import Effect
from mockprovider.scripts.mcp_conditions import CallFacts

TEST: ContextVar[str | None] = ContextVar("mockprovider.mcp.test", default=None)
"""The test (`x-test-id`, or `test=ID` in the prefix) of the request that opened this MCP
session: its server task inherits it, so on a shared mock the session serves that test's
set-up and journals under its id."""

if TYPE_CHECKING:
    from mockprovider.journal import Journal

CACHED_CATALOGS = 16
DEFAULTS = McpOptions()
NOTE = "NOTE"
"""The `method` of a journal entry that is the server's note, not a message on the wire."""


class Settings(Protocol):
    """What the MCP server reads from its mock's settings (`pipeline.Config` has them all)."""

    scenarios: Mapping[str, Any]
    journal: Journal | None
    mcp: McpOptions | None
    """None: the defaults (a `Config` made without `create_app`)."""
    max_body_bytes: int


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where a message came from: the endpoint's path and scenario, and the MCP session."""

    path: str
    selection: str | None
    session: str | None


class McpHost:
    def __init__(self, settings: Callable[[], Settings],
                 test_of: Callable[[Any], str | None] = lambda scope: None) -> None:
        self.settings = settings
        self.test_of = test_of
        """The test an ASGI scope's request belongs to (`TEST`), as the app reads it."""
        self._counts: weakref.WeakKeyDictionary[Tool, int] = weakref.WeakKeyDictionary()
        self._catalogs: dict[tuple[int, int, str | None], tuple[Settings, Catalog]] = {}
        self.faults: dict[tuple[str | None, Any], str] = {}
        """(session, request id) → "drop" or "expire": what the transport does with that answer."""
        self.in_flight: set[tuple[str | None, Any]] = set()
        """(session, request id) of every request the SDK is answering over HTTP."""
        self.sessions: set[str] = set()
        """The MCP sessions open over HTTP, as the tap saw them open and end."""
        self.http: Any = None
        """The Streamable HTTP transport (`mcp.http`), built on the first request."""

    def options(self) -> McpOptions:
        return self.settings().mcp or DEFAULTS

    def catalog(self, selection: str | None) -> Catalog:
        """What `selection` (a scenario, or None for all) serves now; `UnknownName` if nothing."""
        settings, tools = self.settings(), self.options().tools
        key = (id(settings.scenarios), id(tools), selection)
        cached = self._catalogs.get(key)
        if cached is not None and cached[0].scenarios is settings.scenarios:
            return cached[1]
        built = catalog.build(settings.scenarios, tools, selection)
        if len(self._catalogs) >= CACHED_CATALOGS:
            self._catalogs.pop(next(iter(self._catalogs)))
        self._catalogs[key] = (settings, built)
        return built

    def admit(self, tool: Tool, name: str, arguments: Mapping[str, Any] | None, key: str | None) -> CallFacts:
        """Count a call of `tool`: its facts, with the index it is answered as."""
        index = self._counts.get(tool, 0)
        self._counts[tool] = index + 1
        return CallFacts.of(name, arguments, index, key)

    def note(self, where: Where, event: str, *, tool: str | None = None, **facts: Any) -> None:
        """Journal something the server did that no message on the wire says (an effect, a stop)."""
        journal = self.settings().journal
        if journal is not None:
            journal.record(method=NOTE, path=where.path, headers={}, body={"event": event, "tool": tool,
                                                                            **facts},
                           kind="mcp", direction="note", session=where.session, tool=tool, test_id=TEST.get())

    def effect(self, where: Where, call: CallFacts, request_id: Any, scenario: str | None) -> None:
        """Record that `call` ran its tool's side effect: in the ledger, if any, and the journal."""
        ledger = self.options().ledger
        if ledger is not None:
            ledger.record(Effect(tool=call.name, arguments=dict(call.arguments), key=call.key,
                                 session=where.session, scenario=scenario))
        self.note(where, "effect", tool=call.name, id=request_id, arguments=dict(call.arguments),
                  key=call.key)
