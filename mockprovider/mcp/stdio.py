"""`python -m mockprovider mcp --scenarios FILE`: the same scripted MCP server over stdio.

An MCP client starts it as a subprocess and speaks JSON-RPC on its stdin and stdout; a session
is the process. It serves the `mcp` sections of the scenario files named (all of them, or one
scenario's with `--scenario`), with the same handlers as `/mcp`. What HTTP does with a `drop`
step (the connection closes, the answer lost) a stdio server does by exiting without writing the
answer, as a crashed server would; an `expire` step's answer is written, then the server exits
(a stdio session ends only with its process). Effects go to `--ledger DIR`: this process has
no journal anyone could read.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import TracebackType
from typing import Any

from mockprovider.mcp.callable import McpOptions
from mockprovider.mcp.catalog import scripts_of
from mockprovider.mcp.host import McpHost
from mockprovider.mcp.ledger import Ledger, LedgerError
from mockprovider.scripts.files import ScenarioFileError, load_scenarios, paths_from_env


@dataclass(frozen=True, kw_only=True)
class StdioSettings:
    scenarios: Mapping[str, Any]
    mcp: McpOptions = field(default_factory=McpOptions)
    journal: None = None
    max_body_bytes: int = 0
    """Unused: stdio has no request bodies to bound (the SDK reads it line by line)."""


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mockprovider mcp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scenarios", action="append", default=[], metavar="PATH", required=True,
        help="a scenario file (.json/.toml) or a folder of them; repeatable",
    )
    parser.add_argument("--scenario", metavar="NAME", help="serve only this scenario's tools (default: all)")
    parser.add_argument("--ledger", metavar="DIR", default=os.environ.get("MOCK_MCP_LEDGER") or None,
                        help="record every side effect a tool runs as a file in DIR "
                        "(default: $MOCK_MCP_LEDGER)")
    parser.add_argument("--page-size", type=int, default=100, metavar="N",
                        help="tools, resources or prompts per list page (default: 100)")
    return parser


def main(argv: list[str] | None = None) -> None:
    cli = parser()
    args = cli.parse_args(argv)
    try:
        sources = [*paths_from_env(os.environ.get("MOCK_SCENARIOS")), *args.scenarios]
        scripted = scripts_of(load_scenarios(sources))
        ledger = Ledger(args.ledger) if args.ledger else None
    except (ScenarioFileError, LedgerError) as e:
        sys.exit(f"mockprovider mcp: {e}")
    table = {name: _Scripted(script) for name, script in scripted.items()}
    if args.scenario is not None:
        if args.scenario not in table:
            cli.error(f"--scenario {args.scenario}: no scenario of that name has an 'mcp' section; "
                      f"those that do: {', '.join(sorted(table)) or 'none'}")
        table = {args.scenario: table[args.scenario]}
    if not table:
        cli.error("none of the scenario files has an 'mcp' section: there is nothing to serve")
    try:
        options = McpOptions(ledger=ledger, page_size=args.page_size)
    except ValueError as e:
        cli.error(str(e))
    import anyio

    anyio.run(serve, StdioSettings(scenarios=table, mcp=options))


@dataclass(frozen=True)
class _Scripted:
    """A scenario as the catalog reads it: only its MCP script."""

    mcp: Any


async def serve(settings: StdioSettings) -> None:
    """Serve MCP on this process's stdin and stdout until the client closes them (or a fault)."""
    import anyio
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    from mockprovider.mcp import server

    host = McpHost(lambda: settings)
    try:
        version = metadata.version("harness-lab")
    except metadata.PackageNotFoundError:
        version = "0"
    mcp_server = server.build(host, version=version)
    stdout = _CountedStdout(anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")))
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
        # serve_loop speaks the handshake era only (2025-11-25 and older), as over HTTP: a newer
        # client's first request is refused, and it falls back to `initialize`.
        writer = _FaultingWriter(write_stream, host, stdout)
        await serve_loop(mcp_server, _AnsweringReader(read_stream, writer), writer, lifespan_state={})


class _CountedStdout:
    """The wire, as the SDK's stdio transport writes it (a message, then a flush), counting
    the messages flushed: a fault waits for its answer to be out before the process ends."""

    def __init__(self, file: Any) -> None:
        import anyio

        self.file, self.flushed, self._flush = file, 0, anyio.Event()

    async def write(self, text: str) -> None:
        await self.file.write(text)

    async def flush(self) -> None:
        import anyio

        await self.file.flush()
        self.flushed += 1
        self._flush.set()
        self._flush = anyio.Event()

    async def until(self, count: int) -> None:
        while self.flushed < count:
            await self._flush.wait()


class _Around:
    """A stream of the SDK's, wrapped: closing and entering it reach the stream inside."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> Any:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> bool | None:
        return await self.stream.__aexit__(exc_type, exc, traceback)


class _AnsweringReader(_Around):
    """The client's side of stdin: a line that is not JSON, or no JSON-RPC message, is answered
    with the error JSON-RPC prescribes (-32700, -32600, id null), where the SDK only logs it."""

    def __init__(self, stream: Any, writer: _FaultingWriter) -> None:
        super().__init__(stream)
        self.writer = writer

    @property
    def last_context(self) -> Any:
        return getattr(self.stream, "last_context", None)

    def __aiter__(self) -> _AnsweringReader:
        return self

    async def __anext__(self) -> Any:
        from mcp.shared.message import SessionMessage
        from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
        from pydantic import ValidationError

        async for item in self.stream:
            if not isinstance(item, Exception):
                return item
            not_json = isinstance(item, ValidationError) and any(
                e["type"] == "json_invalid" for e in item.errors())
            error = ErrorData(code=PARSE_ERROR, message="Parse error") if not_json else ErrorData(
                code=INVALID_REQUEST, message="Invalid Request: not one JSON-RPC 2.0 message")
            await self.writer.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)))
        raise StopAsyncIteration

    async def receive(self) -> Any:
        return await self.__anext__()


class _FaultingWriter(_Around):
    """The server's side of stdout: an answer a `drop` or `expire` step marked ends the process,
    unwritten (drop) or once written (expire): a stdio server has no other way to lose it."""

    def __init__(self, stream: Any, host: McpHost, stdout: _CountedStdout) -> None:
        super().__init__(stream)
        self.host, self.stdout, self.sent = host, stdout, 0

    async def send(self, item: Any) -> None:
        message = getattr(item.message, "root", item.message)
        fault = self.host.faults.pop((None, getattr(message, "id", None)), None)
        if fault != "drop":
            await self.stream.send(item)
            self.sent += 1
        if fault is not None:
            await self.stdout.until(self.sent)
            sys.stderr.flush()
            # The reader thread waits on stdin for the client, and cannot be cancelled: only
            # ending the process ends the session now, as a crashed server's would.
            os._exit(0)
