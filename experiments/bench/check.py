"""`make bench-check`: the speed ratios this lab promises, each held to a generous bound.

Every check is one small function that measures in this run and returns a `Ratio` (or the
several one measurement gives: the harness's, `overhead.TARGETS`); `CHECKS` lists them. A ratio
past its bound is measured once more before it counts as failed, so one noisy neighbour does
not block a landing; the exit status is 1 if any ratio failed twice, and the message names
each: the ratio, its value and its bound.

The bounds are generous on purpose (what `make bench` reports is the target; this only catches
a regression of the kind that doubles a cost): ratios are taken within one run, interleaved,
so they hold on a slow or busy machine where absolute times do not.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from experiments.bench import floor as bench_floor
from experiments.bench.harness_levers import lever_rows, levers
from experiments.bench.overhead import FSYNC, TARGET_LOOPS, TARGETS, medians, per_turn_runs
from experiments.bench.trick_pairs import all_tricks
from experiments.bench.tricks import savings


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


def harness_vs_raw_loop() -> list[Ratio]:
    """Every ratio of `overhead.TARGETS` (the harness with each store vs a raw httpx loop sending
    the same bodies, per turn; its growth from 20 to 100 turns), from one interleaved run."""
    runs = per_turn_runs(*TARGET_LOOPS)
    m = medians(runs)
    ratios = []
    for t in TARGETS:
        allowance = t.allowance(runs)
        fsync = f", one fsync {m[FSYNC] * 1e3:.2f} ms = {allowance:.2f}x allowed" if t.plus_fsync else ""
        ratios.append(Ratio(name=t.name, value=t.value(runs), bound=t.bound + allowance,
                            detail=f"(medians {m[t.numerator] * 1e3:.2f} vs {m[t.denominator] * 1e3:.2f} ms "
                                   f"per turn{fsync})"))
    return ratios


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
    return _least("speed trick", f"{least.trick}, {least.where}, turn {least.turn}", "tricks",
                  [r.ratio for r in rows])


def _least(kind: str, which: str, plural: str, ratios: list[float]) -> Ratio:
    """The least of `ratios` (without / with), bounded below by TRICK_MARGIN."""
    return Ratio(
        name=f"least {kind}, without / with ({which})",
        value=min(ratios),
        bound=TRICK_MARGIN,
        at_least=True,
        detail=f"({len(ratios)} {plural}, all ratios {min(ratios):.2f}x to {max(ratios):.2f}x)",
    )


def harness_levers_earn_their_lines() -> Ratio:
    """The least of the in-process harness levers' ratios without / with (a few seconds)."""
    rows = lever_rows(levers(), rounds=15)
    least = min(rows, key=lambda r: r.ratio)
    return _least("harness lever", f"{least.lever}, {least.where}", "levers", [r.ratio for r in rows])


CHECKS: list[Callable[[], Ratio | list[Ratio]]] = [
    mock_vs_floor_turn_100,
    harness_vs_raw_loop,
    speed_tricks_earn_their_lines,
    harness_levers_earn_their_lines,
]
"""Each measures once and returns its ratio, or the ratios one measurement gives."""


def run(checks: list[Callable[[], Ratio | list[Ratio]]]) -> list[Ratio]:
    """Each check's ratios, all measured again once if the first measurement puts one past its bound."""
    results = []
    for check in checks:
        ratios = _listed(check())
        if not all(r.ok for r in ratios):
            for ratio in ratios:
                if not ratio.ok:
                    print(f"{ratio.line()}; measuring again", flush=True)
            ratios = _listed(check())
        for ratio in ratios:
            print(ratio.line(), flush=True)
        results += ratios
    return results


def _listed(measured: Ratio | list[Ratio]) -> list[Ratio]:
    return measured if isinstance(measured, list) else [measured]


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    results = run(CHECKS)
    failed = [r for r in results if not r.ok]
    seconds = time.perf_counter() - started
    if failed:
        named = "; ".join(
            f"{r.name} is {r.value:.2f}x, bound {'> ' if r.at_least else ''}{r.bound:.2f}x" for r in failed
        )
        print(f"bench-check failed (twice each): {named}", file=sys.stderr)
        return 1
    print(f"bench-check: {len(results)} ratio(s) within bounds in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
