"""`make bench-check`: the speed ratios this lab promises, each held to a generous bound.

Every check is one small function that measures a ratio in this run and returns a `Ratio`;
`CHECKS` lists them. A ratio past its bound is measured once more before it counts as failed,
so one noisy neighbour does not block a landing; the exit status is 1 if any ratio failed
twice, and the message names each: the ratio, its value and its bound.

The bounds are generous on purpose (what `make bench` reports is the target; this only catches
a regression of the kind that doubles a cost): ratios are taken within one run, interleaved,
so they hold on a slow or busy machine where absolute times do not.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from experiments.bench import floor as bench_floor
from experiments.bench.overhead import harness_loop, raw_loop
from experiments.bench.trick_pairs import all_tricks
from experiments.bench.tricks import savings
from harness.chapter import make_sandbox
from mockprovider.server import serve_in_thread


@dataclass(frozen=True, kw_only=True)
class Ratio:
    name: str
    value: float
    bound: float
    detail: str = ""
    at_least: bool = False
    """The ratio must stay above `bound` (a speed-up), not at or below it (a cost)."""

    @property
    def ok(self) -> bool:
        return self.value > self.bound if self.at_least else self.value <= self.bound

    def line(self) -> str:
        verdict = "ok" if self.ok else ("UNDER BOUND" if self.at_least else "OVER BOUND")
        bound = f"bound > {self.bound:.2f}x" if self.at_least else f"bound {self.bound:.2f}x"
        return f"{self.name}: {self.value:.2f}x ({bound}) {verdict}  {self.detail}"


def mock_vs_floor_turn_100() -> Ratio:
    """The mock answering a turn-100 request vs a bare Starlette endpoint parsing the same body."""
    with bench_floor.servers() as servers:
        c = bench_floor.compare(servers, 100, samples=60)
    return Ratio(
        name="mock at turn 100 / bare Starlette floor",
        value=c.ratio,
        bound=1.5,
        detail=f"(median {c.mock_us:,.0f} vs {c.floor_us:,.0f} us, CPU-time ratio {c.cpu_ratio:.2f})",
    )


def _harness(url: str, sandbox: Path, turns: int) -> Coroutine[None, None, float]:
    return harness_loop(url, sandbox, turns, "memory")


def _harness_sqlite(url: str, sandbox: Path, turns: int) -> Coroutine[None, None, float]:
    return harness_loop(url, sandbox, turns, "sqlite")


LOOPS: dict[str, tuple[Callable[[str, Path, int], Coroutine[None, None, float]], int]] = {
    "raw-100": (raw_loop, 100),
    "harness-20": (_harness, 20),
    "harness-100": (_harness, 100),
    "sqlite-100": (_harness_sqlite, 100),
}
"""Runs of `runaway` a ratio may compare, each (loop, turns): the raw httpx loop at 100 turns, the
harness with a MemoryStore at 20 and at 100, and with a SQLiteStore at 100; a loop returns seconds."""


def per_turn_medians(*names: str, rounds: int = 5) -> dict[str, float]:
    """Seconds per turn of the named `LOOPS`, measured interleaved round by round against one mock
    (only the ones a ratio compares: each check runs what it needs, not all of them)."""
    runs: dict[str, list[float]] = {name: [] for name in names}
    with serve_in_thread() as url, tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        sandbox = make_sandbox(Path(tmp) / "sandbox")
        for _ in range(rounds):
            for name in names:
                loop, turns = LOOPS[name]
                runs[name].append(asyncio.run(loop(url, sandbox, turns)) / turns)
    return {name: statistics.median(seconds) for name, seconds in runs.items()}


def harness_vs_raw_loop_turn_100() -> Ratio:
    """The harness with a MemoryStore vs a raw httpx loop sending the same bodies, per turn."""
    m = per_turn_medians("raw-100", "harness-100")
    detail = f"({m['harness-100'] * 1e3:.2f} vs {m['raw-100'] * 1e3:.2f} ms per turn)"
    return Ratio(name="harness per turn at 100 turns / raw httpx loop", value=m["harness-100"] / m["raw-100"],
                 bound=2.0, detail=detail)


def harness_turn_100_vs_turn_20() -> Ratio:
    """Whether the harness's cost per turn stays flat as the run grows (saves that cost what the
    turn adds): per turn at 100 turns over per turn at 20."""
    m = per_turn_medians("harness-20", "harness-100")
    detail = f"({m['harness-100'] * 1e3:.2f} vs {m['harness-20'] * 1e3:.2f} ms per turn)"
    return Ratio(name="harness per turn at 100 turns / at 20 turns", value=m["harness-100"] / m["harness-20"],
                 bound=1.5, detail=detail)


TRICK_MARGIN = 1.02
"""Every speed trick's without / with ratio must exceed this: one that saves nothing is a defect."""


def speed_tricks_earn_their_lines() -> Ratio:
    """The least of the speed tricks' ratios without / with (a few seconds: few, short rounds)."""
    loop = asyncio.new_event_loop()
    try:
        rows = savings(all_tricks(loop), rounds=40, batch_s=0.0005)
    finally:
        loop.close()
    least = min(rows, key=lambda r: r.ratio)
    return Ratio(
        name=f"least speed trick, without / with ({least.trick}, {least.where}, turn {least.turn})",
        value=least.ratio,
        bound=TRICK_MARGIN,
        at_least=True,
        detail=f"({len(rows)} tricks, all ratios {min(r.ratio for r in rows):.2f}x to "
               f"{max(r.ratio for r in rows):.2f}x)",
    )


CHECKS: list[Callable[[], Ratio]] = [
    mock_vs_floor_turn_100,
    harness_vs_raw_loop_turn_100,
    harness_turn_100_vs_turn_20,
    speed_tricks_earn_their_lines,
]


def run(checks: list[Callable[[], Ratio]]) -> list[Ratio]:
    """Each check's ratio, measured again once if the first measurement is past its bound."""
    results = []
    for check in checks:
        ratio = check()
        if not ratio.ok:
            print(f"{ratio.line()}; measuring again", flush=True)
            ratio = check()
        print(ratio.line(), flush=True)
        results.append(ratio)
    return results


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    failed = [r for r in run(CHECKS) if not r.ok]
    seconds = time.perf_counter() - started
    if failed:
        named = "; ".join(
            f"{r.name} is {r.value:.2f}x, bound {'> ' if r.at_least else ''}{r.bound:.2f}x" for r in failed
        )
        print(f"bench-check failed (twice each): {named}", file=sys.stderr)
        return 1
    print(f"bench-check: {len(CHECKS)} ratio(s) within bounds in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
