"""The harness's cost per turn against a raw loop sending the same bodies to the same mock.

Both drive `runaway` (a tool call every turn, never an answer) for a fixed number of turns
over one keep-alive connection: the raw loop is the least an agent can do — post the
conversation, append the reply, run the call it asks for (the same `list_files` tool object
the harness runs) and append its listing, repeat — and the harness does the same through
`run()` with a store. Neither runs the last reply's call: the harness's turn cap leaves it
pending. The difference per turn is what the harness adds; how that difference grows from 20
to 100 turns says whether its per-turn work is flat or grows with the run (a save that rewrote
the whole history made it grow). `make bench` and `make bench-check` both measure with these
functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from experiments.lab.postgres import new_database, throwaway_server
from harness import (
    Cancel,
    Limits,
    MemoryStore,
    ModelClient,
    OpenAIChat,
    SQLiteStore,
    Store,
    ToolContext,
    new_run,
    open_store,
    run,
)
from harness.chapter import SYSTEM, chapter_tools, make_sandbox
from harness.tools import schema
from mockprovider.server import serve_in_thread

TASK = "Which file mentions a timeout?"
STORES: dict[str, Callable[[Path], Store | None]] = {
    "none": lambda _: None,
    "memory": lambda _: MemoryStore(),
    "sqlite": lambda folder: SQLiteStore.in_folder(folder / "state", durability="process-crash"),
    "sqlite-power-loss": lambda folder: SQLiteStore.in_folder(folder / "state", durability="power-loss"),
}
"""The stores a loop can save to by name; "sqlite" is the default durability, named so that
`$HARNESS_DURABILITY` cannot change what the benchmark measures."""


async def raw_loop(base_url: str, sandbox: Path, turns: int) -> float:
    """Seconds a bare httpx loop takes for `turns` turns of `runaway`, with the harness's bodies."""
    tools = chapter_tools(sandbox)
    first = new_run(TASK, system=SYSTEM)
    messages = list(first.messages)
    body_tools = [schema(t) for t in tools]
    ctx = ToolContext(run_id="raw", call_id="c", cancel=Cancel(), progress=lambda _: None)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            reply = await http.post("/chat/completions", json={"model": "runaway", "messages": messages,
                                                               "tools": body_tools})
            reply.raise_for_status()  # a refused body must fail the measurement, not be timed
            message = reply.json()["choices"][0]["message"]
            call = message["tool_calls"][0]
            messages.append({"role": "assistant", "content": message["content"], "tool_calls": [call]})
            if turn < turns:  # run as an agent must, every turn: the folder may have changed
                messages.append({"role": "tool", "tool_call_id": call["id"], "name": "list_files",
                                 "content": await tools[0].run({}, ctx)})
        return time.perf_counter() - started


def fsync_seconds(folder: Path, times: int = 50) -> float:
    """Mean seconds of one fsync on `folder`'s disk as a commit makes it: 4 KiB appended to a
    file (a WAL grows by each commit), then `os.fsync`. A mean, as a loop's time per turn is: a
    disk that is fast at the median can be slow now and then, and a turn pays for both."""
    fd, name = tempfile.mkstemp(dir=folder, prefix="fsync-")
    try:
        seconds = 0.0
        for _ in range(times):
            os.write(fd, os.urandom(4096))
            started = time.perf_counter()
            os.fsync(fd)
            seconds += time.perf_counter() - started
    finally:
        os.close(fd)
        os.unlink(name)
    return seconds / times


async def harness_loop(base_url: str, sandbox: Path, turns: int, store: str) -> float:
    """Seconds `run()` takes for `turns` turns of `runaway`, saving to the named store (a name in
    `STORES`, or a store URL such as `postgresql://…`)."""
    with tempfile.TemporaryDirectory(prefix="overhead-") as folder:
        saver = open_store(store) if "://" in store else STORES[store](Path(folder))
        try:
            async with ModelClient(base_url) as client:
                model = OpenAIChat("runaway", client=client)
                state, tools = new_run(TASK, system=SYSTEM), chapter_tools(sandbox)  # as the raw loop's
                started = time.perf_counter()
                await run(state, model=model, tools=tools, limits=Limits(max_turns=turns), store=saver)
                elapsed = time.perf_counter() - started
        finally:
            if saver is not None and hasattr(saver, "close"):
                saver.close()
    if state.turns != turns:
        raise RuntimeError(f"the harness ran {state.turns} turns, not {turns} ({state.status})")
    return elapsed


LOOPS: dict[str, tuple[str, int]] = {
    "raw-20": ("raw", 20),
    "raw-100": ("raw", 100),
    "harness-20": ("memory", 20),
    "harness-100": ("memory", 100),
    "sqlite-100": ("sqlite", 100),
    "sqlite-power-loss-100": ("sqlite-power-loss", 100),
    "postgres-100": ("postgres", 100),
}
"""Runs of `runaway` a ratio may compare, each (store, turns): "raw" is the raw loop, "postgres" a
database on a throwaway PostgreSQL server, any other name one of `STORES`."""
FSYNC = "fsync"
"""Not a loop: one fsync on the disk the SQLite loops write to (`fsync_seconds`), measured in the
same rounds."""


def per_turn_runs(*names: str, rounds: int = 5, postgres: str | None = None) -> dict[str, list[float]]:
    """Seconds per turn of the named `LOOPS` (and `FSYNC`, seconds per fsync) in each round,
    measured interleaved round by round against one mock (only the ones asked for). A "postgres"
    loop saves into the database `postgres` names, else into one on a throwaway server started here."""
    runs: dict[str, list[float]] = {name: [] for name in names}
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(serve_in_thread())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-loops-")))
        sandbox = make_sandbox(tmp / "sandbox")
        pg = postgres
        if pg is None and any(LOOPS[n][0] == "postgres" for n in names if n != FSYNC):
            pg = new_database(stack.enter_context(throwaway_server()))
        for n in range(rounds + 1):  # round 0 warms every loop up, unmeasured
            # Every other round runs backwards, so no loop always follows the same neighbour (a
            # PostgreSQL server still busy with the last commits, a disk still flushing).
            for name in names if n % 2 else names[::-1]:
                gc.collect()  # the garbage of the loop before is not collected on this one's clock
                if name == FSYNC:
                    seconds = fsync_seconds(Path(tempfile.gettempdir()))
                else:
                    store, turns = LOOPS[name]
                    loop = (raw_loop(url, sandbox, turns) if store == "raw"
                            else harness_loop(url, sandbox, turns, pg if store == "postgres" else store))
                    seconds = asyncio.run(loop) / turns
                if n:
                    runs[name].append(seconds)
    return runs


def medians(runs: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(seconds) for name, seconds in runs.items()}


@dataclass(frozen=True, kw_only=True)
class Target:
    """One promised ratio of per-turn times: its target (`make bench`) and its generous bound
    (`make bench-check`)."""

    name: str
    numerator: str
    denominator: str
    target: float
    bound: float
    plus_fsync: bool = False
    """Target and bound both allow one fsync per turn more (a synced commit per turn)."""

    def value(self, runs: dict[str, list[float]]) -> float:
        """The median of the rounds' ratios: each ratio of two loops run moments apart, so a busy
        spell that slows one round slows both its sides."""
        return _paired(runs[self.numerator], runs[self.denominator])

    def allowance(self, runs: dict[str, list[float]]) -> float:
        """What one fsync adds to the ratio (0 unless `plus_fsync`)."""
        return _paired(runs[FSYNC], runs[self.denominator]) if self.plus_fsync else 0.0


def _paired(numerators: list[float], denominators: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))


TARGETS = [
    Target(name="harness + MemoryStore / raw httpx loop, per turn at 20 turns",
           numerator="harness-20", denominator="raw-20", target=1.2, bound=1.6),
    Target(name="harness + MemoryStore / raw httpx loop, per turn at 100 turns",
           numerator="harness-100", denominator="raw-100", target=1.2, bound=1.6),
    # The harness's fixed cost per turn is small (its own connections), so what the mock's reads
    # add as bodies grow weighs here: a mock reading every turn in full (its memory missing the
    # transcript behind earlier rounds' runs of the task) grows past this bound.
    Target(name="harness + MemoryStore, per turn at 100 turns / at 20 turns",
           numerator="harness-100", denominator="harness-20", target=1.3, bound=1.45),
    Target(name="harness + SQLiteStore, durability process-crash (the default) / raw httpx loop, "
                "per turn at 100 turns",
           numerator="sqlite-100", denominator="raw-100", target=1.3, bound=1.8),
    Target(name="harness + SQLiteStore, durability power-loss / raw httpx loop, per turn at 100 turns",
           numerator="sqlite-power-loss-100", denominator="raw-100", target=1.3, bound=2.2, plus_fsync=True),
    Target(name="harness + PostgresStore / raw httpx loop, per turn at 100 turns",
           numerator="postgres-100", denominator="raw-100", target=1.5, bound=3.0),
]
"""The harness's promised ratios, all from one interleaved `per_turn_runs` run."""

TARGET_LOOPS = tuple(dict.fromkeys([*(n for t in TARGETS for n in (t.denominator, t.numerator)), FSYNC]))
"""Everything `TARGETS` needs measured, in a fixed order: each harness loop beside the raw loop it
is compared with, the fsync last."""
