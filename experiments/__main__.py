"""`python -m experiments [NAME ...]`: rerun the chapter's measurements, write `results/`.

Starts the mock in its own process on a loopback port (or uses `LLM_BASE_URL`), runs the
experiments concurrently — the arithmetic ones together, then the wall-clock ones together, so
their sleeps (latency, the slow tool) overlap instead of adding up — prints one line per
experiment as it finishes, and writes every table and chart. Running all of them also
rewrites the index, `results/README.md`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from experiments import REGISTRY

try:  # the tables and charts need the `experiments` extra, which the base install leaves out
    from experiments.lab import index
    from experiments.lab.paths import RESULTS
    from experiments.lab.report import outcome, write
    from experiments.lab.runs import Env, open_client
    from experiments.lab.servers import mock_process
except ModuleNotFoundError as missing:
    if (package := (missing.name or "").partition(".")[0]) not in ("pandas", "matplotlib"):
        raise
    sys.exit(f"python -m experiments: {package} is not installed; the lab needs the `experiments` "
             "extra: `make experiments` sets it up, or `.venv/bin/pip install -e '.[experiments]'`")


async def _run_all(names: list[str], env: Env, out: Path) -> list[str]:
    async with open_client(env) as pooled:
        return await _gather(names, pooled, out)


async def _gather(names: list[str], env: Env, out: Path) -> list[str]:
    failed: list[str] = []
    t0 = time.perf_counter()

    async def one(name: str):
        module = REGISTRY[name]
        started = time.perf_counter()
        try:
            o = outcome(module, await module.measure(env))
        except Exception as e:  # report every failure, not only the first
            print(f"  {name:<18} FAILED after {time.perf_counter() - started:5.1f} s: {e!r}", flush=True)
            failed.append(name)
            return name, None
        write(name, module.TITLE, o, out)
        verdict = "ok" if not o.broken else f"FINDING DID NOT HOLD: {', '.join(o.broken)}"
        if o.broken:
            failed.append(name)
        print(f"  {name:<18} {time.perf_counter() - started:5.1f} s  {verdict}", flush=True)
        return name, o

    # Arithmetic first, all at once; then the wall-clock experiments together, on a quiet loop,
    # so their timings measure the harness rather than the other experiments.
    timed = [n for n in names if getattr(REGISTRY[n], "WALL_CLOCK", False)]
    results = await asyncio.gather(*(one(n) for n in names if n not in timed))
    results += await asyncio.gather(*(one(n) for n in timed))
    if len(names) == len(REGISTRY):
        done = dict(r for r in results if r[1] is not None)
        (out / "README.md").write_text(index.render([(n, done[n]) for n in names if n in done], out))
    print(f"{len(names)} experiments in {time.perf_counter() - t0:.1f} s -> {out}", flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of: {', '.join(REGISTRY)}")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fast", action="store_true", help="smaller sweeps (the test suite's pass)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        parser.error(f"unknown experiment(s) {', '.join(unknown)}; known: {', '.join(REGISTRY)}")
    names = args.names or list(REGISTRY)

    given = os.environ.get("LLM_BASE_URL")
    server = nullcontext(given) if given else mock_process()
    with server as base_url, tempfile.TemporaryDirectory(prefix="experiments-") as tmp:
        print(f"mock at {base_url}; running {len(names)} experiment(s)", flush=True)
        env = Env(base_url=base_url, fast=args.fast, workdir=Path(tmp))
        failed = asyncio.run(_run_all(names, env, args.out))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
