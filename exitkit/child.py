"""A new process for what one process cannot show. Run by the kit, not by hand:

    python -m exitkit.child resume MODULE:ADAPTER JOB_FILE DECISION_JSON  # adapter.resume(job, decision)
    python -m exitkit.child run    MODULE:ADAPTER JOB_FILE null           # adapter.run(job), for peak RSS
    python -m exitkit.child raw    - JOB_FILE null  # replay bodies.json beside JOB_FILE with bare httpx

Prints one JSON line: the outcome and this process's peak resident set size in KiB. The kit's
package imports nothing heavy, so the peak is the adapter's (and its framework's) own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from exitkit.contract import Outcome, decision_from_json
from exitkit.loader import AdapterError, load
from exitkit.setup import Setup


def peak_rss_kib() -> int:
    """VmHWM: this process's own peak (`ru_maxrss` carries the parent's over fork and exec)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    return int(next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), 0))


CANNOT_LOAD = 3
"""The exit status when the adapter does not load here: the kit's trouble, not the agent's exit."""


async def _main(command: str, adapter: Any, job_file: Path, decision_json: str) -> Outcome:
    setup = Setup.load(job_file)
    if command == "raw":
        from exitkit.raw import replay

        bodies = json.loads((job_file.parent / "bodies.json").read_text())
        ok = await replay(setup.base_url, bodies)
        return Outcome(status="replayed", answer=f"{ok} of {len(bodies)} ok")
    job = setup.job()
    if command == "run":
        return await adapter.run(job)
    return await adapter.resume(job, decision_from_json(json.loads(decision_json)))


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in ("resume", "run", "raw"):
        print(__doc__, file=sys.stderr)
        return 2
    command, spec, job_file, decision_json = argv
    try:
        adapter = None if command == "raw" else load(spec)
    except AdapterError as e:
        print(f"exitkit.child: {e}", file=sys.stderr, flush=True)
        return CANNOT_LOAD
    try:
        outcome = asyncio.run(_main(command, adapter, Path(job_file), decision_json))
    except Exception as e:  # what escapes is the measurement (a second resume may raise)
        outcome = Outcome.raised(e)
    if not isinstance(outcome, Outcome):
        outcome = Outcome(status="returned", answer=str(outcome))
    print(json.dumps({"outcome": outcome.to_json(), "peak_rss_kib": peak_rss_kib()}), flush=True)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # Not sys.exit: it waits for every thread the agent left (an SDK's exporter, a worker), so a
    # resume that returned would still hold the kit until its timeout and lose its outcome.
    os._exit(code)
