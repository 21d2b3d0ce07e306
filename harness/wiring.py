"""How the CLI wires a saved run: the settings it was started with, its sandbox and trace, its
model and the chapter's tools, the store the command names. `harness` and `harness ui` both
resume runs through `drive`, so a run continues the same way from either."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from harness.cancel import Cancel
from harness.chapter import BudgetCheck, Knobs, chapter_tools, every_tool, limits_checked, make_sandbox
from harness.client import ModelClient, OpenAIChat
from harness.codec import StateFileError, decode
from harness.listing import safe
from harness.loop import Policy, Progress, run
from harness.state import RunState
from harness.store import DEFAULT_FILE, SqlStore, open_store
from harness.store.sqlite import SQLiteStore
from harness.trace import JsonlTrace
from harness.usage import Limits

Dedupe = Literal["off", "read-only", "all"]
ErrorWording = Literal["fatal", "generic", "descriptive"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything `harness run` was told; saved in the run (`meta["settings"]`)."""

    scenario: str = "plan"
    max_turns: int | None = 20
    budget: float | None = None
    hard_budget: bool = False
    budget_check: BudgetCheck = "before_call"
    dedupe: Dedupe = "off"
    """`all` is the chapter's naive cache (every tool deduped, writes included)."""
    errors: ErrorWording = "descriptive"
    feed_back_permanent: bool = False
    auto_approve: tuple[str, ...] = ()
    mock_options: str | None = None
    scan_seconds: float = 3.0

    def limits(self) -> Limits:
        return limits_checked(self.budget_check, max_turns=self.max_turns, max_budget_usd=self.budget,
                              hard_budget=self.hard_budget)

    def policy(self) -> Policy:
        dedupe = every_tool if self.dedupe == "all" else self.dedupe == "read-only"
        return Policy(errors=self.errors, dedupe=dedupe, auto_approve=frozenset(self.auto_approve))

    def knobs(self) -> Knobs:
        return Knobs(feed_back_permanent=self.feed_back_permanent)


class NotACliRun(ValueError):
    """A run saved through the Python API: the CLI does not know its model and tools."""


def cli_run(state: RunState) -> bool:
    return "settings" in state.meta or "scenario" in state.meta


def settings_of(state: RunState) -> Settings:
    if not cli_run(state):
        raise NotACliRun(
            f"run {state.run_id} was started from Python, not by this CLI, which does not know its "
            "model and tools: continue it with harness.approve/reject and harness.run in Python"
        )
    raw, meta = state.meta.get("settings"), state.meta
    if isinstance(raw, dict) and "scenario" not in raw:
        raise StateFileError(f"run {state.run_id} has settings without a scenario; refusing to guess one")
    if raw is None and "scenario" in meta:  # a run saved by the schema-1 CLI kept flat keys
        names = {f.name for f in dataclasses.fields(Settings)}
        raw = {k: v for k, v in meta.items() if k in names}
        raw["feed_back_permanent"] = meta.get("stop_on_permanent") is False
    try:
        return decode(Settings, raw, "meta.settings")
    except Exception as e:  # noqa: BLE001 - any decoding problem is a damaged file
        raise StateFileError(f"run {state.run_id} has no usable CLI settings ({e})") from None


def run_paths(state: RunState, state_dir: Path) -> tuple[Path, Path]:
    """The run's sandbox and trace: as the run recorded them, else under the state folder."""
    paths = []
    for key, default in (("sandbox", state_dir / "sandboxes" / state.run_id),
                         ("trace", state_dir / "traces" / f"{state.run_id}.jsonl")):
        recorded = state.meta.get(key)
        if recorded is None:
            paths.append(default)
        elif isinstance(recorded, str) and Path(recorded).is_absolute() and "\0" not in recorded:
            paths.append(Path(recorded))
        else:
            raise StateFileError(
                f"run {state.run_id} records a {key} that is not an absolute path: {recorded!r}"
            )
    return paths[0], paths[1]


async def drive(state: RunState, store: SqlStore, args: argparse.Namespace,
                checkpoint: Callable[[str], None] | None) -> RunState:
    """Run `state` to its next stop as the CLI wires a run: its scenario's model, the chapter's
    tools in its sandbox, its trace, Ctrl-C as a cancel (`harness ui` resumes runs through this too)."""
    s = settings_of(state)
    sandbox, trace = run_paths(state, args.state_dir)
    if sandbox.parent.is_symlink():
        raise ValueError(f"{sandbox.parent} is a symlink; the harness writes only into real folders")
    if not sandbox.is_dir() or sandbox.is_symlink():
        make_sandbox(sandbox)  # refuses a symlink
    started = time.monotonic()

    def on_progress(p: Progress) -> None:
        ms = (time.monotonic() - started) * 1000
        print(f"   progress: {safe(p.label)}  (t+{ms:.0f} ms)", file=sys.stderr, flush=True)

    cancel = _ctrl_c_cancels()
    headers = {"x-mock-options": s.mock_options} if s.mock_options else None
    async with ModelClient(args.base_url) as client:
        model = OpenAIChat(s.scenario, client=client, headers=headers)
        research = model.with_name("plan") if s.scenario == "research" else None
        tools = chapter_tools(sandbox, scan_seconds=s.scan_seconds, research=research, knobs=s.knobs())
        try:
            return await run(
                state, model=model, tools=tools, limits=s.limits(), policy=s.policy(), cancel=cancel,
                store=store, trace=JsonlTrace(trace), on_progress=on_progress, checkpoint=checkpoint,
            )
        finally:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)


def _ctrl_c_cancels() -> Cancel:
    cancel, loop = Cancel(), asyncio.get_running_loop()

    def on_ctrl_c() -> None:
        cancel.set("user pressed Ctrl-C")
        print("   stopping and saving… (Ctrl-C again to quit without saving)", file=sys.stderr, flush=True)
        loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C raises KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, on_ctrl_c)
    except (ValueError, RuntimeError, NotImplementedError):
        pass  # not the main thread (or no signals here): Ctrl-C keeps its default meaning
    return cancel


def open_cli_store(args: argparse.Namespace, checkpoint: Callable[[str], None] | None) -> SqlStore:
    """The store the command names: --store, else $HARNESS_STORE, else the state folder's SQLite;
    with the durability --durability names, else $HARNESS_DURABILITY's."""
    url = args.store or os.environ.get("HARNESS_STORE")
    durability = args.durability
    store = (open_store(url, durability=durability) if url
             else SQLiteStore(args.state_dir / DEFAULT_FILE, durability=durability))
    store.checkpoint = checkpoint
    return store
