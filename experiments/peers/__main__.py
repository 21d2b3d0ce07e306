"""`python -m experiments.peers` (`make peers`): every framework's card, each run in its own
virtualenv, merged into results/peers.md / .json / .png.

A framework whose virtualenv cannot be built, or whose card breaks, is a row of *error* cells
that say why, never a missing row. `--only NAME,...` runs some frameworks (the others are left
out of the card); `--fast` runs one overhead pair on `plan` instead of the full set.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from exitkit.contract import Declared
from exitkit.report import write
from exitkit.verdict import CASES, Result
from experiments.lab.paths import RESULTS, ROOT
from experiments.peers import FRAMEWORKS, NAME, TITLE, Framework, node
from experiments.peers.venvs import Venv, ensure

CARD_TIMEOUT_S = 1500
INSTALLS_AT_ONCE = 3
TIMING = ("cancellation", "overhead")
"""The cases whose figures are times (Stop to end, per turn, RSS): run after every install has
finished, one card at a time, so that nothing of this run shares the machine with them."""
BEHAVIOUR = tuple(c for c in CASES if c not in TIMING)
"""The cases judged on counts and texts only (requests, runs of the effect, what was sent back),
where a slower machine changes no figure: run as each framework's virtualenv is ready, while the
later ones still install."""

Card = tuple[list[Declared], list[Result]]


def _broken(framework: Framework, why: str, cases: Sequence[str] = CASES) -> Card:
    """The framework's row when `cases` of it could not be measured: an *error* each, saying why."""
    who = Declared(spec=next(iter(framework.agents)), name=framework.name)
    return [who], [Result(case=case, adapter=who.name, verdict="error", summary=why[:200]) for case in cases]


def _card(framework: Framework, python: Path, fast: bool, tmp: Path, cases: Sequence[str]) -> dict[str, Any]:
    out = tmp / f"{framework.name}.json"
    argv = [str(python), "-m", "experiments.peers.one", framework.name, str(out), "--cases", ",".join(cases),
            *(["--fast"] * fast)]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    out.unlink(missing_ok=True)
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=sys.stdout, stderr=subprocess.PIPE,
                          text=True, timeout=CARD_TIMEOUT_S, check=False, cwd=ROOT)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"its card broke (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return json.loads(out.read_text())


def _builds(frameworks: list[Framework], pool: ThreadPoolExecutor) -> dict[Future[Venv], Framework]:
    """Every framework's virtualenv, building in `pool`, `INSTALLS_AT_ONCE` at a time."""
    log = lambda line: print(line, flush=True)  # noqa: E731
    # Each npm folder once, before the pool: two `npm ci` in one folder would tread on each other.
    npm = {folder: node.ensure(ROOT / folder, log=log) for folder in {f.npm for f in frameworks if f.npm}}

    def build(framework: Framework) -> Venv:
        if framework.npm is not None:
            return npm[framework.npm]
        if framework.extra is None:
            return Venv(python=Path(sys.executable))
        return ensure(ROOT, framework.name, framework.extra, log=log)

    return {pool.submit(build, f): f for f in frameworks}


def _measure(framework: Framework, venv: Venv, fast: bool, tmp: Path,
             cases: Sequence[str] = CASES) -> tuple[dict[str, str], Card]:
    """(versions or the install's failure, the adapters and results of `cases` of its card)."""
    if venv.python is None:
        return {"install": venv.error}, _broken(framework, f"not installed: {venv.error}", cases)
    try:
        card = _card(framework, venv.python, fast, tmp, cases)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return {"card": str(e)[:300]}, _broken(framework, str(e), cases)
    report = card["report"]
    adapters = [Declared(spec=a["spec"], name=a["name"], limits=frozenset(a["limits"]))
                for a in report["adapters"]]
    return card["versions"], (adapters, [Result(**r) for r in report["results"]])


Part = tuple[dict[str, str], Card, float]
"""A run of some of a framework's cases: (versions or what failed, adapters and results, seconds)."""


def _part(framework: Framework, venv: Venv, fast: bool, tmp: Path, cases: Sequence[str]) -> Part:
    began = time.monotonic()
    versions, card = _measure(framework, venv, fast, tmp, cases)
    seconds = time.monotonic() - began
    print(f"{framework.name}, {' '.join(cases)}: {seconds:.0f} s", flush=True)
    return versions, card, seconds


def _merged(framework: Framework, parts: Sequence[Part]) -> Part:
    """The framework's parts as one card: rows in the framework's order, cases in the card's."""
    versions: dict[str, str] = {}
    for got, _, _ in parts:
        versions |= {k: v for k, v in got.items() if k not in versions}
    by_name = {a.name: a for _, (who, _), _ in reversed(parts) for a in who}
    order = {spec: i for i, spec in enumerate(framework.agents)}
    adapters = sorted(by_name.values(), key=lambda a: order.get(a.spec, -1))
    row = {a.name: i for i, a in enumerate(adapters)}
    results = sorted((r for _, (_, got), _ in parts for r in got),
                     key=lambda r: (row[r.adapter], CASES.index(r.case)))
    return versions, (adapters, results), sum(seconds for _, _, seconds in parts)


def _cards(frameworks: list[Framework], fast: bool, tmp: Path, started: float) -> list[Part]:
    """Every framework's card: its behaviour cases as soon as its virtualenv is ready (while later
    ones install), then, every install done, its timing cases, one framework after another."""
    venvs: dict[str, Venv] = {}
    parts: dict[str, list[Part]] = {}
    with ThreadPoolExecutor(max_workers=INSTALLS_AT_ONCE) as pool:
        for done in as_completed(builds := _builds(frameworks, pool)):
            framework = builds[done]
            venvs[framework.name] = done.result()
            parts[framework.name] = [_part(framework, venvs[framework.name], fast, tmp, BEHAVIOUR)]
    print(f"virtualenvs ready in {time.monotonic() - started:.0f} s", flush=True)
    for framework in frameworks:
        parts[framework.name].append(_part(framework, venvs[framework.name], fast, tmp, TIMING))
    return [_merged(f, parts[f.name]) for f in frameworks]


def _preface(rows: list[tuple[str, dict[str, str], float]]) -> str:
    lines = ["Each framework runs in a virtualenv of its own (`.venv-peers/<name>`, pinned in "
             "pyproject's `peers-<name>` extras); ours and the plain loop in the lab's own. The "
             "TypeScript/JavaScript agents (`node-openai`, `vercel-ai`, `openai-agents-js`) are command "
             "adapters, installed with `npm ci` from `node-agents/package-lock.json`.\n",
             "| framework | versions | card took |", "| --- | --- | --- |"]
    for name, versions, seconds in rows:
        shown = ", ".join(f"`{p}` {v}" for p, v in versions.items()).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {name} | {shown} | {seconds:.0f} s |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.peers", description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fast", action="store_true", help="one overhead pair, on plan only")
    parser.add_argument("--only", default="", metavar="NAME,...", help="frameworks: "
                        + ", ".join(f.name for f in FRAMEWORKS))
    args = parser.parse_args(argv)
    wanted = [n for n in args.only.split(",") if n]
    if unknown := set(wanted) - {f.name for f in FRAMEWORKS}:
        parser.error(f"unknown framework {sorted(unknown)}")
    started = time.monotonic()
    chosen = [f for f in FRAMEWORKS if not wanted or f.name in wanted]
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        cards = _cards(chosen, args.fast, Path(tmp), started)
    adapters = [a for _, (who, _), _ in cards for a in who]
    results = [r for _, (_, got), _ in cards for r in got]
    rows = [(f.name, versions, seconds) for f, (versions, _, seconds) in zip(chosen, cards, strict=True)]
    for path in write(adapters, results, args.out, title=TITLE, command="make peers", name=NAME,
                      preface=_preface(rows)):
        print(f"wrote {path}", flush=True)
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
