"""The chapter's demo, apart from the core: its sandbox, its tools, and its wrong turns.

`make_sandbox(dir)` writes the chapter's three logs plus a key the process may not open;
`chapter_tools(dir)` is the chapter's catalog over that folder: list_files, read_file,
delete_file (a write that needs approval) and scan_archive (slow, with progress, honouring
cancellation), plus `Research`, a tool with a whole sub-agent behind it.

The designs the chapter argues against are kept here to measure why they are wrong, without a
branch for any of them in the core loop:
- `Knobs.deaf_tools` (a tool wrapper): the Stop signal reaches only the HTTP call, never the tools;
- `Knobs.feed_back_permanent` (a tool wrapper): a permanent error (permission denied) is fed back
  as data instead of stopping the run;
- `every_tool`, as `Policy(dedupe=every_tool)`: the naive cache, which dedupes writes too.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from harness.cancel import Cancel
from harness.loop import run
from harness.model import Model
from harness.state import RUN_ID, new_run, reason_of
from harness.tools import PERMANENT_ERRORS, Tool, ToolContext
from harness.usage import Limits

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
    """(Re)create the sandbox files in `directory`; the key file gets no permission bits.

    Refuses a folder that is a symlink, and never writes through a planted symlink: the
    sandbox may sit in a shared temp folder where anyone can place one.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    if root.is_symlink():
        raise ValueError(f"sandbox folder {root} is a symlink; refusing to write through it")
    for name, text in (
        ("errors.log", ERRORS_LOG), ("access.log", ACCESS_LOG),
        ("notes.txt", NOTES_TXT), (FORBIDDEN, PRIVATE_KEY),
    ):
        path = root / name
        if path.is_symlink():
            path.unlink()  # a link where a sandbox file belongs: replace it, never follow it
        elif path.exists():
            path.chmod(0o600)  # the key file of an earlier sandbox has no permission bits
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    (root / FORBIDDEN).chmod(0)
    return root


def _resolve(root: Path, name: Any) -> Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"path must be a plain file name from list_files, got {name!r}")
    return root / name


def _read(path: Path, name: str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {name}. Call list_files to see what exists.") from None
    if stat.S_ISLNK(mode):  # it may point anywhere, outside the sandbox included
        raise ValueError(f"{name} is a symlink; read_file reads only plain files in the folder")
    # Root can open a mode-000 file, so the permission bits are checked explicitly.
    if not mode & (stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH):
        raise PermissionError(f"permission denied: {name}")
    try:
        # O_NOFOLLOW: a link swapped in after the check above is refused too (ELOOP).
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), encoding="utf-8") as f:
            return f.read()
    except PermissionError:
        raise PermissionError(f"permission denied: {name}") from None
    except OSError as e:
        raise ValueError(f"cannot read {name}: {e.strerror}") from None


@dataclass(frozen=True)
class ListFiles:
    root: Path
    name: str = "list_files"
    description: str = "List the files in the working folder with their sizes in bytes."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_OBJECT))
    read_only: bool = True
    needs_approval: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        entries = await asyncio.to_thread(lambda: sorted(self.root.iterdir()))
        return "\n".join(f"{p.name} ({p.stat().st_size} bytes)" for p in entries if p.is_file())


@dataclass(frozen=True)
class ReadFile:
    root: Path
    name: str = "read_file"
    description: str = "Read a text file from the working folder."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_PATH))
    read_only: bool = True
    needs_approval: bool = False

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _resolve(self.root, args.get("path"))
        return await asyncio.to_thread(_read, path, args["path"])


@dataclass(frozen=True)
class DeleteFile:
    root: Path
    name: str = "delete_file"
    description: str = "Delete a file from the working folder. Needs the user's approval."
    parameters: dict[str, Any] = field(default_factory=lambda: dict(_PATH))
    read_only: bool = False
    needs_approval: bool = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        path = _resolve(self.root, args.get("path"))
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


SYSTEM = (
    "You are a careful assistant working in a folder of log files. Use the tools to look "
    "before you answer, never guess file contents, and answer in one short sentence."
)
"""The demo's system prompt: every chapter run starts with it."""

RESEARCH_SYSTEM = (
    "You are a research assistant. Investigate the question with the tools and reply with a "
    "one-sentence summary of what you found."
)


def _child_id(ctx: ToolContext) -> str:
    """`<parent>.<call id>`, or a digest of the call id when the provider's id is not a safe name."""
    child = f"{ctx.run_id}.{ctx.call_id}"
    if RUN_ID.fullmatch(child):
        return child
    return f"{ctx.run_id[:100]}.{hashlib.sha256(ctx.call_id.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Research:
    """A sub-agent: its own transcript and limits; inherits the signal and spends from the
    parent's budget (its own limit, or what the parent has left, whichever is smaller)."""

    model: Model
    tools: Sequence[Tool]
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
    max_turns: int = 6
    max_budget_usd: float = 0.05

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        child = new_run(str(args.get("question", "")), system=RESEARCH_SYSTEM, run_id=_child_id(ctx))
        budget = self.max_budget_usd
        if ctx.budget_left_usd is not None:
            budget = min(budget, ctx.budget_left_usd)
        limits = Limits(max_turns=self.max_turns, max_budget_usd=budget, hard_budget=ctx.hard_budget)
        try:
            out = await run(child, model=self.model, tools=self.tools, limits=limits, pricing=ctx.pricing,
                            cancel=ctx.cancel, trace=ctx.trace)
        finally:
            ctx.spent_usd += child.cost_usd
        ctx.details.update(child_run_id=out.run_id, child_turns=out.turns,
                           child_cost_usd=out.cost_usd, child_status=out.status)
        if out.status == "completed":
            return out.answer or "no result"
        ctx.cancel.raise_if_set()
        raise RuntimeError(f"the research sub-agent stopped {out.status} ({reason_of(out)})")


# --- the chapter's wrong turns -------------------------------------------------------------


BudgetCheck = Literal["before_call", "after_call"]
"""Where the budget is checked: `before_call` (the core's: overshoot ≤ one turn) or `after_call`,
the placement the chapter warns about."""


@dataclass(frozen=True, kw_only=True)
class CheckedAfterCall(Limits):
    """The budget compared with what was spent *before* the latest reply, as if checked right
    after paying for it: a run overshoots by up to two turns. Kept to measure the difference."""

    def spent_for_check(self, cost_usd: float, last_turn_usd: float) -> float:
        return cost_usd - last_turn_usd


def limits_checked(budget_check: BudgetCheck, **limits: Any) -> Limits:
    """`Limits(**limits)`, or the teaching variant that checks the budget after the call."""
    return (CheckedAfterCall if budget_check == "after_call" else Limits)(**limits)


@dataclass(frozen=True, kw_only=True)
class Knobs:
    """Designs the chapter argues against; all off is the harness as it should be."""

    deaf_tools: bool = False
    """The Stop signal reaches only the HTTP call: tools get a signal that never fires."""
    feed_back_permanent: bool = False
    """Feed permanent errors (permission denied) back to the model instead of stopping."""


def every_tool(tool: Tool) -> bool:
    """The naive cache, for `Policy(dedupe=every_tool)`: identical calls of ANY tool are deduped,
    so the second of two identical writes silently never runs."""
    return True


class FeedBack(Exception):
    """A permanent error passed on as an ordinary one (same words), so the run continues."""


class Taught:
    """A tool with the chapter's wrong turns applied."""

    def __init__(self, inner: Tool, knobs: Knobs) -> None:
        self.inner, self.knobs = inner, knobs
        self.name, self.description, self.parameters = inner.name, inner.description, inner.parameters
        self.read_only = inner.read_only
        self.needs_approval = inner.needs_approval

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        inner = replace(ctx, cancel=Cancel()) if self.knobs.deaf_tools else ctx
        try:
            return await self.inner.run(args, inner)
        except PERMANENT_ERRORS as e:
            if self.knobs.feed_back_permanent:
                raise FeedBack(str(e)) from e
            raise
        finally:
            if inner is not ctx:
                ctx.spent_usd += inner.spent_usd


def chapter_tools(
    sandbox: Path, *, scan_seconds: float = 3.0, research: Model | None = None, knobs: Knobs = Knobs()
) -> list[Tool]:
    """The chapter's catalog over `sandbox`; a `research` model adds the sub-agent tool."""
    tools: list[Tool] = [
        ListFiles(sandbox), ReadFile(sandbox), DeleteFile(sandbox), ScanArchive(seconds=scan_seconds)
    ]
    if research is not None:
        tools.append(Research(model=research, tools=[ListFiles(sandbox), ReadFile(sandbox)]))
    return [Taught(t, knobs) for t in tools] if knobs != Knobs() else tools
