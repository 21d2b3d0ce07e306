"""`python -m experiments.reliability.suite` (`make reliability`): the fault matrix, full size.

Runs the reliability suite (`tests/reliability`) with RELIABILITY_FULL=1 — SIGKILL at every
boundary of `plan` and `destructive`, 50 trials of each race between two processes on one
run, 10,000 fuzzed requests to the mock, hostile provider replies to the harness (garbage,
impossible usage, thousands of calls, 20 MB arguments, trickled bodies, terminal escapes),
200 concurrent runs x cap 50 against one and two uvicorn workers —
while every test appends one line per case to a ledger. The ledger becomes
`results/reliability.csv` (one row per case) and `results/reliability.md` (one row per fault:
cases tried, survived, what was lost, which must be zero). Exit status 1 if any case failed;
the table is written either way, so a failure is visible in it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.lab.paths import RESULTS, ROOT
from experiments.lab.report import markdown_table

NAME = "reliability"
TITLE = "Reliability: crash matrix, hostile input, load"


def run_suite(ledger: Path, *, full: bool, pytest_args: Sequence[str] = ()) -> tuple[int, float]:
    """Run tests/reliability as a child process; its exit code and wall time."""
    env = {**os.environ, "RELIABILITY_LEDGER": str(ledger)}
    env.pop("RELIABILITY_FULL", None)
    if full:
        env["RELIABILITY_FULL"] = "1"
    argv = [sys.executable, "-m", "pytest", "tests/reliability", "-q", "-p", "no:cacheprovider", *pytest_args]
    t0 = time.perf_counter()
    code = subprocess.run(argv, cwd=ROOT, env=env).returncode
    return code, time.perf_counter() - t0


def summarise(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per fault, in the order the suite met them."""
    faults: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        faults.setdefault(c["fault"], []).append(c)
    rows = []
    for fault, group in faults.items():
        tried = sum(c["tried"] for c in group)
        survived = sum(c["survived"] for c in group)
        lost = sum(c["lost"] for c in group)
        failing = [c["case"] for c in group if c["survived"] < c["tried"] or c["lost"]]
        rows.append(
            {
                "fault": fault,
                "cases tried": tried,
                "survived": survived,
                "lost": lost,
                "verdict": "survived" if not failing else f"FAILED: {len(failing)} case(s), listed below",
            }
        )
    return rows


def load_rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        m = c.get("metrics") or {}
        if "p50_ms" in m:
            rows.append(
                {
                    "uvicorn workers": m["workers"],
                    "runs x cap": f"{m['runs']} x {m['cap']}",
                    "requests": m["requests"],
                    "errors": m["errors"],
                    "p50 ms": m["p50_ms"],
                    "p99 ms": m["p99_ms"],
                    "max ms": m["max_ms"],
                    "wall s": m["wall_s"],
                }
            )
    return rows


def render(cases: list[dict[str, Any]], *, code: int, seconds: float, full: bool) -> str:
    summary = summarise(cases)
    held = [r for r in summary if r["verdict"] == "survived"]
    tried, lost = sum(r["cases tried"] for r in summary), sum(r["lost"] for r in summary)
    finding = (
        f"{len(held)} of {len(summary)} fault classes survived every case: {tried:,} cases tried, "
        f"{sum(r['survived'] for r in summary):,} survived, {lost} lost."
    )
    parts = [f"# {TITLE}\n", f"**Finding.** {finding}\n", markdown_table(summary)]
    load = load_rows(cases)
    if load:
        parts += [
            "## Load: per-request latency, client-side\n",
            markdown_table(load),
            "Measured around each HTTP request (sent to body read) under one shared `ModelClient`; "
            "the client and the mock share this machine's cores, so the two-worker row competes "
            "with the 200 runs' own CPU.\n",
        ]
    failures = [c for c in cases if c["survived"] < c["tried"] or c["lost"]]
    if failures:
        parts += [
            "## Cases that did not survive\n",
            markdown_table(
                [{"fault": c["fault"], "case": c["case"], "what happened": c["detail"]} for c in failures]
            ),
        ]
    parts.append(
        "**Method.** Crash matrix: one uninterrupted run records the boundaries it passes "
        "(`before_save`, `mid_save`, `after_model_reply`, `after_intent`, `after_tool_result`); for each "
        "index, `python -m experiments.reliability.crash` SIGKILLs a real CLI process exactly there, and "
        "new processes resume it (an in-doubt delete is approved if access.log is still there, rejected if "
        "it is gone). "
        "Lost = turns missing or extra against an uninterrupted run with the same decisions, model calls "
        "repeated for saved turns (the mock's own request log), deletes run twice (the run's JSONL trace), "
        "cost drift. Mock fuzz: hypothesis bodies, headers and content types; every answer a 2xx "
        "chat.completion/SSE stream or an OpenAI-shaped 4xx, never a 500 or a dropped connection. Harness: "
        "a scripted `httpx.MockTransport` provider; every run ends in a status with a message and its "
        "saved file loads; usage outside [0, 10^9) is a malformed reply, calls over the cap and oversized "
        "arguments are answered with errors and never echoed, a trickled body meets the attempt deadline, "
        "and CLI output carries no raw control character. Races: separate OS processes on one state folder, "
        "released together from a start barrier (`python -m experiments.reliability.crash gate`) or tried "
        "while the owner waits at a checkpoint (`hold:`); lost = a delete run twice, a record that disagrees "
        "with the sandbox, or more than one winner (every loser must exit 4 saying why).\n"
    )
    size = "full size (RELIABILITY_FULL=1)" if full else "fast size (the `make test` subset)"
    parts.append(
        f"Suite: `pytest tests/reliability`, {size}, {seconds:.0f} s, exit {code}. Per-case rows: "
        f"[{NAME}.csv]({NAME}.csv). Regenerate: `make reliability`.\n"
    )
    return "\n".join(parts)


def write(cases: list[dict[str, Any]], out: Path, **how: Any) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv, md = out / f"{NAME}.csv", out / f"{NAME}.md"
    buf = io.StringIO()
    columns = ["fault", "case", "tried", "survived", "lost", "detail"]
    pd.DataFrame(cases, columns=columns).to_csv(buf, index=False, lineterminator="\n")
    csv.write_text(buf.getvalue())
    md.write_text(render(cases, **how))
    return [md, csv]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.reliability.suite", description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--fast", action="store_true", help="the make-test sizes, not the full matrix")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (e.g. -k load)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        ledger = Path(tmp) / "ledger.jsonl"
        code, seconds = run_suite(ledger, full=not args.fast, pytest_args=args.pytest_args)
        cases = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    if not cases:
        print("reliability: the suite recorded no cases", file=sys.stderr)
        return 1
    paths = write(cases, args.out, code=code, seconds=seconds, full=not args.fast)
    print(render(cases, code=code, seconds=seconds, full=not args.fast).split("\n\n")[1])
    print(f"wrote {', '.join(str(p) for p in paths)}")
    broken = code != 0 or any(c["survived"] < c["tried"] or c["lost"] for c in cases)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
