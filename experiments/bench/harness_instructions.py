"""The harness's own work per turn, counted in CPU instructions under valgrind's callgrind.

The wall-clock ratios of `experiments.bench.overhead` swing with a shared machine's load; the
instructions a turn executes barely do. One process runs under callgrind with one thread per
trace file; the mock is served from a thread of the same process, so the loop's own thread (the
first) holds only what the agent side does: the raw httpx loop's work, or the harness's. Each
loop runs `runaway` for `SHORT` and for `LONG` turns inside a call of `functools.reduce` (the
region callgrind dumps around, as in `experiments.bench.instructions`); the difference over the
turns between is the work of one turn, without the client's start-up or the first connection.

    python -m experiments.bench.harness_instructions            # raw loop, MemoryStore, SQLiteStore
    python -m experiments.bench.harness_instructions none memory
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import glob
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SHORT, LONG = 2, 22
"""The two run lengths whose difference is counted: LONG - SHORT turns."""
REPEAT = 3
"""Runs of each length inside one counted region."""
STORES = ("memory", "sqlite")


def run(stores: list[str]) -> None:
    """Under callgrind: one counted region per (loop, length), raw first, in the order `main` reads."""
    from experiments.bench.overhead import harness_loop, raw_loop
    from harness.chapter import make_sandbox
    from mockprovider.server import serve_in_thread

    with serve_in_thread() as url, tempfile.TemporaryDirectory(prefix="harness-instr-") as tmp:
        sandbox = make_sandbox(Path(tmp) / "sandbox")
        for store in ["raw", *stores]:
            for turns in (SHORT, LONG):
                def loop(turns: int = turns, store: str = store) -> float:
                    work = (raw_loop(url, sandbox, turns) if store == "raw"
                            else harness_loop(url, sandbox, turns, store))
                    return asyncio.run(work)

                loop()  # warm: imports, caches, the trust store
                functools.reduce(lambda _, __: loop(), range(REPEAT), None)


def per_turn(regions: list[int], stores: list[str]) -> dict[str, float]:
    """Instructions per turn of each loop, from the counted regions in `run`'s order."""
    return {name: (regions[2 * k + 1] - regions[2 * k]) / REPEAT / (LONG - SHORT)
            for k, name in enumerate(["raw", *stores])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="*", default=list(STORES),
                        help="stores beside the raw loop: none (no store), memory, sqlite, sqlite-power-loss")
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # the process under callgrind
    args = parser.parse_args(argv)
    if args.run:
        run(args.stores)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--separate-threads=yes",
               "--dump-before=functools_reduce", "--dump-after=functools_reduce",
               sys.executable, "-m", "experiments.bench.harness_instructions", "--run", *args.stores]
        done = subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True,
                              text=True, check=False)
        if done.returncode:
            raise RuntimeError(done.stderr[-3000:])
        regions: dict[int, int] = {}
        for path in glob.glob(out + ".*-01"):  # the loop's own thread
            with open(path) as f:
                text = f.read()
            if "Trigger: --dump-after=functools_reduce" in text:
                regions[int(re.search(r"^part: (\d+)", text, re.M)[1])] = int(
                    re.search(r"^totals: (\d+)", text, re.M)[1])
    counts = per_turn([regions[k] for k in sorted(regions)], args.stores)
    for name, count in counts.items():
        print(f"{name}: instructions per turn {count:,.0f}; / raw loop {count / counts['raw']:.3f}x")


if __name__ == "__main__":
    main()
