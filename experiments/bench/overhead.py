"""The harness's cost per turn against a raw loop sending the same bodies to the same mock.

Both drive `runaway` (a tool call every turn, never an answer) for a fixed number of turns
over one keep-alive connection: the raw loop is the least an agent can do — post the
conversation, append the reply and the tool's listing, repeat — and the harness does the same
through `run()` with a store. The difference per turn is what the harness adds; how that
difference grows from 20 to 100 turns says whether its per-turn work is flat or grows with the
run (a save that rewrote the whole history made it grow). `make bench` and `make bench-check`
both measure with these functions.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from harness import (
    Cancel,
    FileStore,
    Limits,
    MemoryStore,
    ModelClient,
    OpenAIChat,
    Store,
    ToolContext,
    new_run,
    run,
)
from harness.chapter import SYSTEM, chapter_tools
from harness.tools import schema

TASK = "Which file mentions a timeout?"
STORES: dict[str, Callable[[Path], Store | None]] = {
    "none": lambda _: None,
    "memory": lambda _: MemoryStore(),
    "file": lambda folder: FileStore(folder / "state"),
}


async def raw_loop(base_url: str, sandbox: Path, turns: int) -> float:
    """Seconds a bare httpx loop takes for `turns` turns of `runaway`, with the harness's bodies."""
    tools = chapter_tools(sandbox)
    first = new_run(TASK, system=SYSTEM)
    messages = list(first.messages)
    body_tools = [schema(t) for t in tools]
    ctx = ToolContext(run_id="raw", call_id="c", cancel=Cancel(), progress=lambda _: None)
    listing = await tools[0].run({}, ctx)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        started = time.perf_counter()
        for _ in range(turns):
            reply = await http.post("/chat/completions", json={"model": "runaway", "messages": messages,
                                                               "tools": body_tools})
            reply.raise_for_status()  # a refused body must fail the measurement, not be timed
            message = reply.json()["choices"][0]["message"]
            call = message["tool_calls"][0]
            messages.append({"role": "assistant", "content": message["content"], "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call["id"], "name": "list_files",
                             "content": listing})
        return time.perf_counter() - started


async def harness_loop(base_url: str, sandbox: Path, turns: int, store: str) -> float:
    """Seconds `run()` takes for `turns` turns of `runaway`, saving to the named store."""
    with tempfile.TemporaryDirectory(prefix="overhead-") as folder:
        async with ModelClient(base_url) as client:
            model = OpenAIChat("runaway", client=client)
            state = new_run(TASK, system=SYSTEM)
            started = time.perf_counter()
            await run(state, model=model, tools=chapter_tools(sandbox), limits=Limits(max_turns=turns),
                      store=STORES[store](Path(folder)))
            elapsed = time.perf_counter() - started
    if state.turns != turns:
        raise RuntimeError(f"the harness ran {state.turns} turns, not {turns} ({state.status})")
    return elapsed
