"""`python -m experiments.peers` (`make peers`): the kit's report card for every peer, into results/.

`--fast` runs one overhead pair on `plan` instead of the full set (the smoke pass).
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib.metadata import version
from pathlib import Path

from exitkit.card import check
from exitkit.report import write
from experiments.lab.paths import RESULTS
from experiments.peers import ADAPTERS, NAME, TITLE

PACKAGES = ("openai-agents", "pydantic-ai-slim", "langgraph", "langchain-openai", "openai")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.peers", description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fast", action="store_true", help="one overhead pair, on plan only")
    args = parser.parse_args(argv)
    versions = {package: version(package) for package in PACKAGES}
    for package, number in versions.items():
        print(f"{package} {number}", flush=True)
    started = time.monotonic()
    adapters, results = [], []
    for cases in dict.fromkeys(ADAPTERS.values()):
        specs = [spec for spec, wanted in ADAPTERS.items() if wanted == cases]
        got = check(specs, cases=cases, fast=args.fast, log=lambda line: print(line, flush=True))
        adapters += got[0]
        results += got[1]
    order = {spec: i for i, spec in enumerate(ADAPTERS)}
    adapters.sort(key=lambda a: order[a.spec])
    preface = "Versions: " + ", ".join(f"`{p}` {v}" for p, v in versions.items()) + ".\n"
    for path in write(adapters, results, args.out, title=TITLE, command="make peers", name=NAME,
                      preface=preface):
        print(f"wrote {path}", flush=True)
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
