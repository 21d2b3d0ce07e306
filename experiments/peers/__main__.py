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
from concurrent.futures import ThreadPoolExecutor
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


def _broken(framework: Framework, why: str) -> tuple[list[Declared], list[Result]]:
    """The framework's row when it could not be measured: one *error* per case, saying why."""
    who = Declared(spec=next(iter(framework.agents)), name=framework.name)
    return [who], [Result(case=case, adapter=who.name, verdict="error", summary=why[:200]) for case in CASES]


def _card(framework: Framework, python: Path, fast: bool, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{framework.name}.json"
    argv = [str(python), "-m", "experiments.peers.one", framework.name, str(out), *(["--fast"] * fast)]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=sys.stdout, stderr=subprocess.PIPE,
                          text=True, timeout=CARD_TIMEOUT_S, check=False, cwd=ROOT)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"its card broke (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return json.loads(out.read_text())


def _venvs(frameworks: list[Framework]) -> dict[str, Venv]:
    """Every framework's virtualenv, built side by side before any card runs (an install waits on
    the network more than on the machine, and a card's timings must not share it with one)."""
    log = lambda line: print(line, flush=True)  # noqa: E731
    # Each npm folder once, before the pool: two `npm ci` in one folder would tread on each other.
    npm = {folder: node.ensure(ROOT / folder, log=log) for folder in {f.npm for f in frameworks if f.npm}}

    def build(framework: Framework) -> Venv:
        if framework.npm is not None:
            return npm[framework.npm]
        if framework.extra is None:
            return Venv(python=Path(sys.executable))
        return ensure(ROOT, framework.name, framework.extra, log=log)

    with ThreadPoolExecutor(max_workers=INSTALLS_AT_ONCE) as pool:
        return dict(zip((f.name for f in frameworks), pool.map(build, frameworks), strict=True))


def _measure(framework: Framework, venv: Venv, fast: bool, tmp: Path) -> tuple[dict[str, str], Any]:
    """(versions or the install's failure, the card's adapters and results)."""
    if venv.python is None:
        return {"install": venv.error}, _broken(framework, f"not installed: {venv.error}")
    python = venv.python
    try:
        card = _card(framework, python, fast, tmp)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return {"card": str(e)[:300]}, _broken(framework, str(e))
    report = card["report"]
    adapters = [Declared(spec=a["spec"], name=a["name"], limits=frozenset(a["limits"]))
                for a in report["adapters"]]
    return card["versions"], (adapters, [Result(**r) for r in report["results"]])


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
    venvs = _venvs(chosen)
    print(f"virtualenvs ready in {time.monotonic() - started:.0f} s", flush=True)
    adapters, results, rows = [], [], []
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        for framework in chosen:
            began = time.monotonic()
            versions, (who, got) = _measure(framework, venvs[framework.name], args.fast, Path(tmp))
            adapters += who
            results += got
            rows.append((framework.name, versions, time.monotonic() - began))
            print(f"{framework.name}: {time.monotonic() - began:.0f} s", flush=True)
    for path in write(adapters, results, args.out, title=TITLE, command="make peers", name=NAME,
                      preface=_preface(rows)):
        print(f"wrote {path}", flush=True)
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
