"""A second process, for what one process cannot show. Run as a script (not with `-m`):

    python experiments/peers/child.py approve MODULE BASE_URL DIR   # resume an approval run
    python experiments/peers/child.py rss MODULE BASE_URL DIR       # run `plan`, report peak RSS

Prints one JSON object: the `Ending`, the process's peak resident set size in KiB and which of
pandas, matplotlib and the harness it imported (none, or only the harness for `ours`). The
`experiments` package's own `__init__` imports every experiment (and pandas and matplotlib with
them), so it is replaced here by a bare package of the same directory: the child imports only
`peers/case.py`, `folder.py` and the one peer module, and a memory row measures that peer and
nothing else of the lab.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from dataclasses import asdict
from importlib import import_module
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WATCHED = ("pandas", "matplotlib", "harness")
"""Modules a memory row must not carry unless they are that peer's own."""


def _bare_experiments_package() -> None:
    sys.path[0] = str(ROOT)  # the script's own directory would shadow nothing useful
    package = types.ModuleType("experiments")
    package.__path__ = [str(ROOT / "experiments")]
    sys.modules.setdefault("experiments", package)


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
    _bare_experiments_package()
    case_module = import_module("experiments.peers.case")
    case = case_module.Case.at(base_url, Path(directory))
    peer = import_module(f"experiments.peers.{module}")
    if command == "approve":
        try:
            ending = asyncio.run(peer.approval_resume(case))
        except Exception as e:  # what escapes is the measurement (a second resume may crash)
            ending = case_module.Ending.raised(e)
    else:
        ending = asyncio.run(peer.run(case, "plan", 20))
    imported = sorted(name for name in WATCHED if name in sys.modules)
    print(json.dumps(asdict(ending) | {"peak_rss_kib": peak_rss_kib(), "imported": imported}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
