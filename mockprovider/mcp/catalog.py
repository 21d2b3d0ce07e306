"""What one MCP endpoint offers: the tools, resources and prompts of one scenario, or of all.

`/mcp/{scenario}` serves that scenario file's `mcp` section; `/mcp` (and a stdio server) serves
every scenario's at once. A name two sources define (two files, or a file and a tool given in
code) is ambiguous at `/mcp`: it is left out of the lists, and a call names the per-scenario
URLs that tell the scripts apart. Tools given in code (`McpOptions.tools`) are served at every
endpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mockprovider.mcp.callable import CallableTool
from mockprovider.scripts.mcp_listings import PromptScript, ResourceScript
from mockprovider.scripts.mcp_tools import McpScript, ToolScript

Tool = ToolScript | CallableTool


class UnknownName(LookupError):
    """A name this endpoint does not serve; the message says why, and what it serves."""


@dataclass(frozen=True, kw_only=True)
class Catalog:
    tools: dict[str, Tool] = field(default_factory=dict)
    owners: dict[str, str | None] = field(default_factory=dict)
    """Each tool's scenario (None: given in code)."""
    resources: dict[str, ResourceScript] = field(default_factory=dict)
    prompts: dict[str, PromptScript] = field(default_factory=dict)
    clashes: dict[str, list[str]] = field(default_factory=dict)
    """Names defined by more than one source, with those sources: served by none."""

    def tool(self, name: str) -> Tool:
        return self._find(self.tools, name, "tool")

    def resource(self, uri: str) -> ResourceScript:
        return self._find(self.resources, uri, "resource")

    def prompt(self, name: str) -> PromptScript:
        return self._find(self.prompts, name, "prompt")

    def _find(self, table: Mapping[str, Any], name: str, what: str) -> Any:
        if name in table:
            return table[name]
        key = f"{what}:{name}"
        if key in self.clashes:
            sources = self.clashes[key]
            urls = " or ".join(f"/mcp/{s}" for s in sources if s != "<code>")
            raise UnknownName(f"the {what} {name!r} is defined by {', '.join(sources)}; connect to {urls} "
                              "to pick one")
        known = ", ".join(sorted(table)[:20]) or "none"
        raise UnknownName(f"Unknown {what}: {name!r}; this server's {what}s: {known}")


def scripts_of(scenarios: Mapping[str, Any]) -> dict[str, McpScript]:
    """Each scenario's MCP script, by scenario name (built-ins and files without one have none)."""
    return {name: script.mcp for name, script in scenarios.items()
            if getattr(script, "mcp", None) is not None}


def build(scenarios: Mapping[str, Any], callables: Iterable[CallableTool], selection: str | None) -> Catalog:
    """The catalog of `selection` (a scenario name) or of every scenario (None); `UnknownName`
    if the scenario does not exist or scripts no MCP server."""
    scripts = scripts_of(scenarios)
    if selection is not None and selection not in scripts:
        why = "has no 'mcp' section" if selection in scenarios else "is not a scenario of this server"
        offered = ", ".join(sorted(scripts)) or "none"
        raise UnknownName(f"{selection!r} {why}; the scenarios with an MCP server: {offered}")
    chosen = {selection: scripts[selection]} if selection is not None else scripts
    catalog = Catalog()
    sources: dict[str, list[str]] = {}
    for tool in callables:
        _add(catalog.tools, sources, f"tool:{tool.name}", tool.name, tool, "<code>")
        catalog.owners[tool.name] = None
    for scenario, script in sorted(chosen.items()):
        for tool in script.tools:
            _add(catalog.tools, sources, f"tool:{tool.name}", tool.name, tool, scenario)
            catalog.owners.setdefault(tool.name, scenario)
        for resource in script.resources:
            _add(catalog.resources, sources, f"resource:{resource.uri}", resource.uri, resource, scenario)
        for prompt in script.prompts:
            _add(catalog.prompts, sources, f"prompt:{prompt.name}", prompt.name, prompt, scenario)
    for key, owners in sources.items():
        if len(owners) > 1:
            catalog.clashes[key] = owners
            kind, _, name = key.partition(":")
            {"tool": catalog.tools, "resource": catalog.resources, "prompt": catalog.prompts}[kind].pop(name)
            if kind == "tool":
                catalog.owners.pop(name, None)
    return catalog


def _add(table: dict[str, Any], sources: dict[str, list[str]], key: str, name: str, item: Any,
         source: str) -> None:
    sources.setdefault(key, []).append(source)
    table.setdefault(name, item)
