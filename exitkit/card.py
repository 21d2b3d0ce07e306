"""A report card: every chosen case for every adapter, one after another, against one mock.

`check(specs, commands=...)` is the Python entry (the CLI, `make peers` and the pytest plugin use
it): it loads every adapter and asks every command to describe itself first (a bad spec fails
before any case runs), starts the mock, and runs
the cases, printing a progress line per case. A case that breaks inside the kit or the adapter
in a way the case does not measure is recorded as an `error` result, and the rest go on.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from exitkit.cases import EXITS
from exitkit.command import argv_of, describe
from exitkit.contract import Declared
from exitkit.loader import AdapterError, declared, load
from exitkit.overhead import overhead
from exitkit.report import printable
from exitkit.runner import Kit
from exitkit.verdict import CASES, TITLES, Result


def pick(only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[str]:
    """The cases to run, in the card's order; unknown names are a usage error."""
    if unknown := (set(only) | set(skip)) - set(CASES):
        raise ValueError(f"unknown case {sorted(unknown)}; known: {', '.join(CASES)}")
    return [c for c in CASES if (not only or c in only) and c not in skip]


def run_case(kit: Kit, who: Declared, case: str, *, fast: bool = False) -> Result:
    stopped = len(kit.timeouts)
    try:
        if case == "overhead":
            return overhead(kit, who, fast=fast)
        result = EXITS[case](kit, who)
    except Exception as e:  # the card goes on; the row says what broke
        return Result(case=case, adapter=who.name, verdict="error", summary=f"{type(e).__name__}: {e}"[:200])
    if len(kit.timeouts) > stopped and result.verdict in ("pass", "warn"):  # see NEVER_RETURNED
        result.verdict, result.summary = "fail", f"never returned ({kit.timeouts[-1]}) · {result.summary}"
    return result


def _all(kit: Kit, loaded: list[Declared], cases: list[str], fast: bool,
         log: Callable[[str], None]) -> list[Result]:
    results = []
    for who in loaded:
        for case in cases:
            started = time.monotonic()
            result = run_case(kit, who, case, fast=fast)
            log(printable(f"{who.name} · {TITLES[case]}: {result.cell} ({time.monotonic() - started:.1f} s)"))
            results.append(result)
    return results


Card = tuple[list[Declared], list[Result]]


def check(specs: Sequence[str], *, commands: Sequence[str] = (), cases: Sequence[str] = (),
          fast: bool = False, log: Callable[[str], None] = print, workdir: Path | None = None) -> Card:
    """Run `cases` (default: all) for every adapter spec and every command adapter (a command
    line, `exitkit.command`), in that order; returns the adapters and the results."""
    chosen = list(cases) or pick()
    if both := sorted(set(specs) & set(commands)):  # the kit tells them apart by that text
        raise AdapterError(f"{both[0]!r} given both as an adapter spec and as a command")
    loaded = [declared(spec, load(spec)) for spec in specs]
    loaded += [describe(line, os.environ) for line in commands]
    names = [who.name for who in loaded]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        # Results and the card's rows are keyed by name: a second one would overwrite the first.
        raise AdapterError(f"two adapters named {twice[0]!r}: give each a `name` of its own")
    with tempfile.TemporaryDirectory(prefix="exitkit-") as tmp:
        with Kit.serve(workdir or Path(tmp)) as kit:
            kit.commands.update({line: argv_of(line) for line in commands})
            results = _all(kit, loaded, chosen, fast, log)
    return loaded, results
