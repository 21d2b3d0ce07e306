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
import sys
from pathlib import Path

from exitkit.contract import Outcome, decision_from_json
from exitkit.loader import load
from exitkit.setup import Setup


def peak_rss_kib() -> int:
    """VmHWM: this process's own peak (`ru_maxrss` carries the parent's over fork and exec)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    return int(next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), 0))


async def _main(command: str, spec: str, job_file: Path, decision_json: str) -> Outcome:
    setup = Setup.load(job_file)
    if command == "raw":
        from exitkit.raw import replay

        bodies = json.loads((job_file.parent / "bodies.json").read_text())
        ok = await replay(setup.base_url, bodies)
        return Outcome(status="replayed", answer=f"{ok} of {len(bodies)} ok")
    adapter = load(spec)
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
        outcome = asyncio.run(_main(command, spec, Path(job_file), decision_json))
    except Exception as e:  # what escapes is the measurement (a second resume may raise)
        outcome = Outcome.raised(e)
    if not isinstance(outcome, Outcome):
        outcome = Outcome(status="returned", answer=str(outcome))
    print(json.dumps({"outcome": outcome.to_json(), "peak_rss_kib": peak_rss_kib()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
