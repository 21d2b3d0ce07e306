"""The process every run of a Python adapter runs in. Started by the kit, not by hand:

    python -m exitkit.child run    MODULE:ADAPTER JOB_FILE null           # adapter.run(job)
    python -m exitkit.child resume MODULE:ADAPTER JOB_FILE DECISION_JSON  # adapter.resume(job, decision)
    python -m exitkit.child raw    - JOB_FILE null  # replay bodies.json beside JOB_FILE with bare httpx
    python -m exitkit.child forks  MODULE:ADAPTER   # import it once, fork a copy per run (exitkit.forks)

SIGUSR1 is the kit's Stop button: it sets `job.cancel`. Prints one JSON line: the outcome, when
the call began and returned (`time.monotonic()`), how many tasks the run left running, and
this process's peak resident set size in KiB. The kit's package imports nothing heavy, so the
peak is the adapter's (and its framework's) own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from exitkit.contract import Outcome, decision_from_json
from exitkit.loader import AdapterError, load
from exitkit.mcp import MCP, Calls, served
from exitkit.setup import Setup

STOP_SIGNAL = signal.SIGUSR1
SETTLE_S = 0.5
"""How long tasks a run started may go on after it returns before they count as left running."""
CANNOT_LOAD = 3
"""The exit status when the adapter does not load here: the kit's trouble, not the agent's exit."""


def peak_rss_kib() -> int:
    """VmHWM: this process's own peak (`ru_maxrss` carries the parent's over fork and exec)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    return int(next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), 0))
_SERVING: list[contextlib.ExitStack] = []
"""The MCP servers of this process's run (one at most), kept until the process ends."""
_CALLS = Calls()
"""The calls they are running."""


async def _call(command: str, adapter: Any, job_file: Path, decision_json: str) -> Any:
    setup = Setup.load(job_file)
    if command == "raw":
        from exitkit.raw import replay

        bodies = json.loads((job_file.parent / "bodies.json").read_text())
        ok = await replay(setup.base_url, bodies)
        return Outcome(status="replayed", answer=f"{ok} of {len(bodies)} ok")
    job = setup.job()
    asyncio.get_running_loop().add_signal_handler(STOP_SIGNAL, job.cancel.set)
    if getattr(adapter, "tools", None) == MCP:
        # Served until the process ends, never stopped: stopping would cancel a tool the run left
        # running, and the ledger would read the kit's cancellation as the agent's own.
        _SERVING.append(stack := contextlib.ExitStack())  # held: a collected stack would stop it
        job = replace(job, mcp_url=stack.enter_context(served(job.tools, setup.ledger, _CALLS)))
    if command == "run":
        return await adapter.run(job)
    return await adapter.resume(job, decision_from_json(json.loads(decision_json)))


async def _measured(command: str, adapter: Any, job_file: Path, decision_json: str) -> dict[str, Any]:
    before = asyncio.all_tasks()
    started = time.monotonic()
    try:
        # Its own task, so the tasks it leaves behind are told from this one.
        outcome = await asyncio.ensure_future(_call(command, adapter, job_file, decision_json))
    except Exception as e:  # what escapes is the measurement (a second resume may raise)
        outcome = Outcome.raised(e)
    ended = time.monotonic()
    if not isinstance(outcome, Outcome):
        outcome = Outcome(status="returned", answer=str(outcome))
    left: set[asyncio.Task[Any]] = set()
    if born := asyncio.all_tasks() - before - {asyncio.current_task()}:
        # Left, not cancelled: the process ends right after, and a cancellation the kit caused
        # would read in the ledger as the agent's own.
        left = (await asyncio.wait(born, timeout=SETTLE_S))[1]
    if _SERVING:  # a cancellation the client sent as the run ended is still on its way to the tool
        await asyncio.to_thread(_CALLS.settled, SETTLE_S)
    return {"outcome": outcome.to_json(), "started": started, "ended": ended, "left_running": len(left)}


def _loaded(spec: str) -> str | None:
    try:
        if spec != "-":
            load(spec)
    except AdapterError as e:
        return str(e)
    return None


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "forks":
        from exitkit.forks import serve

        return serve(lambda: _loaded(argv[1]), main)
    if len(argv) != 4 or argv[0] not in ("resume", "run", "raw"):
        print(__doc__, file=sys.stderr)
        return 2
    command, spec, job_file, decision_json = argv
    try:
        adapter = None if command == "raw" else load(spec)
    except AdapterError as e:
        print(f"exitkit.child: {e}", file=sys.stderr, flush=True)
        return CANNOT_LOAD
    # Not asyncio.run: its cleanup would cancel what the run left running, and the ledger would
    # read those cancellations as the agent's own. The process ends instead.
    loop = asyncio.new_event_loop()
    result = loop.run_until_complete(_measured(command, adapter, Path(job_file), decision_json))
    # On a line of its own: an agent that streams tokens leaves its output mid-line.
    print("\n" + json.dumps(result | {"peak_rss_kib": peak_rss_kib()}), flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # Not sys.exit: it waits for every thread the agent left (an SDK's exporter, a worker), so a
    # run that returned would still hold the kit until its timeout and lose its outcome.
    os._exit(code)
