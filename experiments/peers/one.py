"""`python -m experiments.peers.one NAME OUT.json [--fast] [--cases CASE,...]`: one framework's card
(or the part of it in `--cases`), run in its own virtualenv by `make peers`
(`experiments.peers.__main__`), written as JSON for the merge.

OUT.json holds the framework's name, the versions of its packages as installed here, and the
kit's `report.json` of its adapters.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from exitkit.card import check
from exitkit.report import to_json
from exitkit.verdict import CASES
from experiments.lab.paths import ROOT
from experiments.peers import FRAMEWORKS, node

SHOWN_TOO = ("pydantic",)
"""Versions every card shows beside the framework's own: what a framework's findings depend on."""


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.peers.one", description=__doc__)
    parser.add_argument("name", choices=[f.name for f in FRAMEWORKS])
    parser.add_argument("out", type=Path)
    parser.add_argument("--fast", action="store_true", help="one overhead pair, on plan only")
    parser.add_argument("--cases", default=",".join(CASES), metavar="CASE,...",
                        help="run only these of each adapter's cases (an adapter with none left is not run)")
    args = parser.parse_args(argv)
    framework = next(f for f in FRAMEWORKS if f.name == args.name)
    part = args.cases.split(",")
    adapters, results = [], []
    for wanted in dict.fromkeys(framework.agents.values()):
        if not (cases := [c for c in wanted or CASES if c in part]):
            continue
        specs = [spec for spec, its in framework.adapters.items() if its == wanted]
        lines = [line for line, its in framework.commands.items() if its == wanted]
        got = check(specs, commands=lines, cases=cases, fast=args.fast,
                    log=lambda line: print(line, flush=True))
        adapters += got[0]
        results += got[1]
    order = {spec: i for i, spec in enumerate(framework.agents)}
    adapters.sort(key=lambda a: order[a.spec])
    if framework.npm is None:
        versions = {p: _version(p) for p in (*framework.packages, *SHOWN_TOO)}
    else:
        folder = ROOT / framework.npm
        versions = {p: node.version(folder, p) for p in framework.packages} | {"node": node.runtime()}
    args.out.write_text(json.dumps({"framework": framework.name, "versions": versions,
                                    "report": to_json(adapters, results)}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
