"""`python -m experiments.peers` (`make peers`): every exit through every peer; write results/peers.*.

Starts the mock, wrapped in the journal, on a loopback port in this process, measures, prints a
line per exit, and writes `results/peers.md`, `.csv` and `.png`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from experiments.lab.paths import RESULTS
from experiments.peers import report
from experiments.peers.journal import Journal
from experiments.peers.measure import Lab, measure_all
from mockprovider.app import create_app
from mockprovider.server import serve_in_thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.peers", description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fast", action="store_true", help="one overhead round, plan only")
    args = parser.parse_args(argv)
    for v in report.versions():
        print(f"{v['framework']}: {v['package']} {v['version']}", flush=True)
    started = time.monotonic()
    journal = Journal(create_app())
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp, serve_in_thread(journal) as base_url:
        lab = Lab(journal=journal, base_url=base_url, workdir=Path(tmp), fast=args.fast)
        tables = asyncio.run(measure_all(lab, log=lambda line: print(line, flush=True)))
    for name, rows in tables.items():
        print(f"{name}: {report.FINDINGS[name](rows)}", flush=True)
    for path in report.write(tables, args.out):
        print(f"wrote {path}", flush=True)
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
