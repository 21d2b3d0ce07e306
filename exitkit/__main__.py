"""`python -m exitkit run [MODULE:ADAPTER ...] [--command CMD ...] --out DIR`: a report card for each agent.

Writes DIR/report.md, DIR/report.json (schema in `exitkit.report`) and, when matplotlib is
installed, DIR/report.png; prints a progress line per case. Exit status: 0 when no case
failed, 1 when any verdict is `fail` or `error`, 2 for a usage error (a bad spec or case name).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from exitkit.card import check, pick
from exitkit.loader import AdapterError
from exitkit.report import shell_line, unusable, write
from exitkit.verdict import CASES


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m exitkit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the cases for one or more adapters and write the report")
    run.add_argument("adapters", nargs="*", metavar="MODULE:ADAPTER")
    run.add_argument("--command", action="append", default=[], dest="commands", metavar="CMD",
                     help="an agent in any language, run as this command line (docs/exitkit.md, "
                          "\"Any language: command adapters\"); give it again for more")
    run.add_argument("--out", type=Path, required=True, help="folder for report.md, report.json, report.png")
    run.add_argument("--only", type=_names, default=[], metavar="CASE,...", help=f"cases: {', '.join(CASES)}")
    run.add_argument("--skip", type=_names, default=[], metavar="CASE,...")
    run.add_argument("--fast", action="store_true", help="one overhead pair on plan instead of the full set")
    args = parser.parse_args(argv)
    if not args.adapters and not args.commands:
        run.error("name at least one MODULE:ADAPTER or --command CMD")
    if why := unusable(args.out):  # before any case runs: found after them, it would lose the card
        print(f"exitkit: --out {str(args.out)!r}: {why}", file=sys.stderr)
        return 2
    try:
        cases = pick(args.only, args.skip)
        adapters, results = check(args.adapters, commands=args.commands, cases=cases, fast=args.fast,
                                  log=lambda line: print(line, file=sys.stderr, flush=True))
    except (AdapterError, ValueError) as e:
        print(f"exitkit: {e}", file=sys.stderr)
        return 2
    command = shell_line(["python", "-m", "exitkit", *(argv or sys.argv[1:])])
    for path in write(adapters, results, args.out, command=command):
        print(f"wrote {path}")
    return 1 if any(r.verdict in ("fail", "error") for r in results) else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: it waits for every thread an agent left running, so a card already written
    # would hold its caller (a CI job) for ever.
    os._exit(code)
