"""A second process, for what one process cannot show.

    python -m experiments.peers.child approve MODULE BASE_URL DIR   # resume an approval run
    python -m experiments.peers.child rss MODULE BASE_URL DIR       # run `plan`, report peak RSS
    python -m experiments.peers.child rss none BASE_URL DIR         # the shared base: run nothing

Prints one JSON object: the `Ending` and the process's peak resident set size in KiB. Every
child imports the `experiments` package (pandas, matplotlib and the harness come with it), so
`none` measures that shared base.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict
from importlib import import_module
from pathlib import Path

from experiments.peers.case import Case, Ending


def peak_rss_kib() -> int:
    """VmHWM: this process's own peak. (`ru_maxrss` would do, but Linux carries it over from
    the parent across fork and exec, so a child of a large parent reports the parent's peak.)"""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in ("approve", "rss"):
        print(__doc__, file=sys.stderr)
        return 2
    command, module, base_url, directory = argv
    case = Case.at(base_url, Path(directory))
    if module == "none":
        ending = Ending(how="nothing run")
    else:
        peer = import_module(f"experiments.peers.{module}")
        job = peer.approval_resume(case) if command == "approve" else peer.run(case, "plan", 20)
        ending = asyncio.run(job)
    print(json.dumps(asdict(ending) | {"peak_rss_kib": peak_rss_kib()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
