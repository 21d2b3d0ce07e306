"""The built-in tools and the sandbox folder they work in.

`make_sandbox(dir)` writes the chapter's three logs plus a key the process may not open;
`default_tools()` is the chapter's catalog: list_files, read_file, delete_file (a write that
needs approval) and scan_archive (slow, with progress, honouring cancellation). `Research`
is a tool with a whole sub-agent behind it.
"""

from __future__ import annotations

import asyncio
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cancel import Cancelled
from harness.tools import Tool, ToolContext

ERRORS_LOG = """\
2026-09-06T10:14:02Z ERROR worker 3 lost its connection to the queue; reconnecting
2026-09-06T10:14:07Z ERROR worker 7 timed out after 30000 ms
2026-09-06T10:15:31Z ERROR request 81f2 failed: upstream returned 502
2026-09-06T10:17:45Z WARN disk usage at 91% on /var/log
"""
ACCESS_LOG = """\
10.0.0.4 - - [06/Sep/2026:10:14:01] "GET /health HTTP/1.1" 200 2
10.0.0.9 - - [06/Sep/2026:10:14:05] "POST /jobs HTTP/1.1" 202 41
"""
NOTES_TXT = "Remember to rotate your logs.\n"
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nnot-a-real-key\n-----END PRIVATE KEY-----\n"
FORBIDDEN = "private.key"

_OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}
_PATH = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "A file name from list_files."}},
    "required": ["path"],
    "additionalProperties": False,
}


def make_sandbox(directory: str | os.PathLike[str]) -> Path:
    """(Re)create the sandbox files in `directory`; the key file gets no permission bits."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("errors.log", ERRORS_LOG), ("access.log", ACCESS_LOG),
        ("notes.txt", NOTES_TXT), (FORBIDDEN, PRIVATE_KEY),
    ):
        path = root / name
        if path.exists():
            path.chmod(0o600)
        path.write_text(text)
    (root / FORBIDDEN).chmod(0)
    return root


def _resolve(ctx: ToolContext, name: Any) -> Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"path must be a plain file name from list_files, got {name!r}")
    return ctx.sandbox / name


def _read(path: Path, name: str) -> str:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {name}. Call list_files to see what exists.") from None
    # Root can open a mode-000 file, so the permission bits are checked explicitly.
    if not mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH):
        raise PermissionError(f"permission denied: {name}")
    try:
        return path.read_text()
    except PermissionError:
        raise PermissionError(f"permission denied: {name}") from None


@dataclass(frozen=True)
class ListFiles:
    name: str = "list_files"
    description: str = "List the files in the working folder with their sizes in bytes."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_OBJECT))
    read_only: bool = True
    needs_approval: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        entries = await asyncio.to_thread(lambda: sorted(ctx.sandbox.iterdir()))
        return "\n".join(f"{p.name} ({p.stat().st_size} bytes)" for p in entries if p.is_file())


@dataclass(frozen=True)
class ReadFile:
    name: str = "read_file"
    description: str = "Read a text file from the working folder."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_PATH))
    read_only: bool = True
    needs_approval: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _resolve(ctx, args.get("path"))
        return await asyncio.to_thread(_read, path, args["path"])


@dataclass(frozen=True)
class DeleteFile:
    name: str = "delete_file"
    description: str = "Delete a file from the working folder. Needs the user's approval."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_PATH))
    read_only: bool = False
    needs_approval: bool = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _resolve(ctx, args.get("path"))
        try:
            await asyncio.to_thread(path.unlink)
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file: {args['path']}") from None
        return f"deleted {args['path']}"


@dataclass(frozen=True)
class ScanArchive:
    """Slow on purpose: `seconds` over `files` files, a progress line every `every` files."""

    name: str = "scan_archive"
    description: str = "Scan the log archive for known incidents. Slow: takes a few seconds."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_OBJECT))
    read_only: bool = True
    needs_approval: bool = False
    seconds: float = 3.0
    files: int = 1200
    every: int = 200

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        step = self.seconds * self.every / self.files
        for done in range(self.every, self.files + 1, self.every):
            await ctx.cancel.sleep(step)  # wakes the moment the run is cancelled
            ctx.progress(f"scanned {done} of {self.files} files")
        return f"scanned {self.files} files; 2 incidents: worker 7 timed out twice in August."


RESEARCH_SYSTEM = (
    "You are a research assistant. Investigate the question with the tools and reply with a "
    "one-sentence summary of what you found."
)


@dataclass(frozen=True)
class Research:
    """A sub-agent: its own transcript and limits; inherits the cancellation signal."""

    name: str = "research"
    description: str = "Investigate one question about the files and return a short summary."
    parameters: dict[str, Any] = field(default_factory=lambda: {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
        "additionalProperties": False,
    })
    read_only: bool = True
    needs_approval: bool = False
    model: str = "plan"
    max_turns: int = 6
    max_budget_usd: float = 0.05

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        from harness.loop import RunOptions, run  # the loop imports tools, not the reverse
        from harness.state import new_run, reason_of
        from harness.usage import Limits

        child = new_run(str(args.get("question", "")), system=RESEARCH_SYSTEM,
                        run_id=f"{ctx.run_id}.{ctx.call_id}")
        options = RunOptions(
            model=self.model,
            limits=Limits(max_turns=self.max_turns, max_budget_usd=self.max_budget_usd),
            cancel=ctx.cancel, trace=ctx.trace, sandbox=ctx.sandbox,
        )
        out = await run(child, tools=[ListFiles(), ReadFile()], options=options, client=ctx.client)
        ctx.spent_usd += out.cost_usd
        ctx.details.update(child_run_id=out.run_id, child_turns=out.turns,
                           child_cost_usd=out.cost_usd, child_status=out.status)
        if out.status == "completed":
            return out.answer or "no result"
        ctx.cancel.raise_if_set()
        raise RuntimeError(f"the research sub-agent stopped {out.status} ({reason_of(out)})")


def default_tools(*, scan_seconds: float = 3.0, research: bool = False) -> list[Tool]:
    """The chapter's catalog; `research=True` adds the sub-agent tool."""
    tools: list[Tool] = [ListFiles(), ReadFile(), DeleteFile(), ScanArchive(seconds=scan_seconds)]
    if research:
        tools.append(Research())
    return tools


__all__ = [
    "Cancelled", "DeleteFile", "ListFiles", "ReadFile", "Research", "ScanArchive",
    "default_tools", "make_sandbox",
]
