"""13. Latency multiplier: the same three-turn task at several provider latencies.

Its figures are wall-clock and move between reruns: they go to `results/wall-clock/`, the committed
table keeps what ran, and the checks look only at that. The slope and the harness's own share are
recorded by `make bench`, not asserted by `make test`.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass

import numpy as np

from experiments.chapter import figures
from experiments.lab.charts import CHAPTER, OURS, figure
from experiments.lab.report import Prose, Table
from experiments.lab.runs import Env, Run, run_scenario

WALL_CLOCK = True
"""Timed: runs after the arithmetic experiments, with only its wall-clock peers."""
NAME = "latency"
TITLE = "13 · Latency multiplier: `plan` at several provider latencies"
LATENCIES = (0, 50, 100, 250, 500, 1000)
REPEATS = 3
CH = figures.LATENCY
PLAN = figures.PLAN


@dataclass(frozen=True, kw_only=True)
class Measured:
    runs: dict[int, list[Run]]
    """By provider latency (ms): the repeats."""

    @property
    def turns(self) -> int:
        return next(iter(self.runs.values()))[0].state.turns

    def medians(self) -> dict[int, float]:
        return {lat: statistics.median(r.wall_ms for r in rs) for lat, rs in self.runs.items()}

    def slope(self) -> float:
        med = self.medians()
        return float(np.polyfit(list(med), list(med.values()), 1)[0])

    def rest(self) -> list[float]:
        """What is not N × latency: the harness, loopback and the mock's own work, per run."""
        return [w - self.turns * lat for lat, w in self.medians().items()]


async def measure(env: Env, *, deliver_latency: bool = True) -> Measured:
    """`deliver_latency=False` never tells the provider its latency (broken, for the tests)."""
    latencies = LATENCIES[:3] if env.fast else LATENCIES
    # Latencies side by side (their sleeps overlap), repeats one after another (so they don't
    # compete with each other for the CPU at the start of a run).
    runs: dict[int, list[Run]] = {lat: [] for lat in latencies}
    for i in range(REPEATS):
        done = await asyncio.gather(
            *(
                run_scenario(
                    env, "plan", run_id=f"latency-{lat}-{i}", latency_ms=lat if deliver_latency else None
                )
                for lat in latencies
            )
        )
        for lat, r in zip(latencies, done, strict=True):
            runs[lat].append(r)
    return Measured(runs=runs)


def table(m: Measured) -> Table:
    return Table(
        rows=[
            {
                "latency_ms": lat,
                "wall_ms": round(w),
                "turns": m.turns,
                "n_x_latency_ms": m.turns * lat,
                "rest_ms": round(w - m.turns * lat),
            }
            for lat, w in m.medians().items()
        ],
        steady=[
            {
                "latency_ms": lat,
                "runs": len(rs),
                "turns": "/".join(sorted({str(r.state.turns) for r in rs})),
                "status": "/".join(sorted({r.state.status for r in rs})),
                "n_x_latency_ms": m.turns * lat,
                "every run took at least N × latency": _yes(all(r.wall_ms >= m.turns * lat for r in rs)),
            }
            for lat, rs in m.runs.items()
        ],
    )


def _yes(held: bool) -> str:
    return "yes" if held else "no"


def checks(m: Measured) -> dict[str, bool]:
    every = [r for rs in m.runs.values() for r in rs]
    return {
        "every run: three turns, two tool runs, completed": all(
            (r.state.turns, r.tool_runs, r.state.status) == (PLAN.turns, PLAN.tool_runs, PLAN.status)
            for r in every
        ),
        # Not a timing threshold: a provider that waits `lat` on each of N calls cannot answer a
        # run sooner than N × lat, on any machine; only a latency that was not applied gets under it.
        "every run took at least N × latency (the latency is paid on every turn)": all(
            r.wall_ms >= r.state.turns * lat for lat, rs in m.runs.items() for r in rs
        ),
        "every latency measured, each repeated": all(len(rs) == REPEATS for rs in m.runs.values()),
    }


def prose(m: Measured) -> Prose:
    rest = statistics.median(m.rest())
    return Prose(
        finding=(
            f"Wall time grows {m.slope():.2f} ms per ms of provider latency — N = {m.turns} turns times the "
            f"latency — and everything else (harness, loopback, the mock's own work) adds {rest:.0f} ms to "
            f"the three-turn run (chapter: ~{CH.harness_ms} ms for the harness)."
        ),
        headline=(
            f"Wall time grows by N = {m.turns} turns times the provider latency; everything else "
            f"(harness, loopback, the mock's own work) is the wall-clock table's `rest_ms` (chapter: "
            f"~{CH.harness_ms} ms for the harness)."
        ),
        ours=f"slope {m.slope():.2f} (N = {m.turns}) over latencies {', '.join(map(str, m.runs))} ms; "
        f"rest ≈ {rest:.0f} ms per run",
        chapter=f"wall ≈ N × latency; the harness adds ~{CH.harness_ms} ms to a three-turn run",
        notes=[
            f"Wall-clock figures: medians of {REPEATS} runs each, rounded to 1 ms; they vary between runs. "
            "`make bench` measures the harness's own overhead per turn separately."
        ],
    )


def chart(m: Measured):
    fig, ax = figure(
        "Wall time of a three-turn run vs provider latency", "provider latency (ms)", "wall time (ms)"
    )
    med = m.medians()
    xs = np.array(list(med))
    ax.plot(xs, list(med.values()), "o-", color=OURS, label=f"measured (median of {REPEATS})")
    ax.plot(xs, m.turns * xs, "--", color=CHAPTER, label=f"N × latency, N = {m.turns}")
    ax.legend()
    return fig
