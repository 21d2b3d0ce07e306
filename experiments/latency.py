"""13. Latency multiplier: the same three-turn task at several provider latencies."""

from __future__ import annotations

import asyncio
import statistics

import numpy as np

from experiments.common import CHAPTER, OURS, Env, Outcome, Run, figure, run_scenario
from harness import Limits

WALL_CLOCK = True
"""Timed: runs after the arithmetic experiments, with only its wall-clock peers."""
NAME = "latency"
TITLE = "13 · Latency multiplier: `plan` at provider latencies 0–1000 ms"
LATENCIES = (0, 50, 100, 250, 500, 1000)
REPEATS = 3


async def _plan(env: Env, latency: int, i: int) -> Run:
    r = await run_scenario(
        env,
        "plan",
        run_id=f"latency-{latency}-{i}",
        limits=Limits(max_turns=20),
        mock_options=f"latency={latency}",
    )
    return r


async def measure(env: Env) -> Outcome:
    latencies = LATENCIES[:3] if env.fast else LATENCIES
    # Latencies side by side (their sleeps overlap), repeats one after another (so they don't
    # compete with each other for the CPU at the start of a run).
    runs: dict[int, list[Run]] = {lat: [] for lat in latencies}
    for i in range(REPEATS):
        for lat, r in zip(
            latencies, await asyncio.gather(*(_plan(env, lat, i) for lat in latencies)), strict=True
        ):
            runs[lat].append(r)
    medians = {lat: statistics.median(r.wall_ms for r in rs) for lat, rs in runs.items()}
    every = [r for rs in runs.values() for r in rs]
    turns = every[0].state.turns
    slope, intercept = np.polyfit(list(medians), list(medians.values()), 1)
    rows = [
        {
            "latency_ms": lat,
            "wall_ms": round(w),
            "turns": turns,
            "n_x_latency_ms": turns * lat,
            "rest_ms": round(w - turns * lat),
        }
        for lat, w in medians.items()
    ]

    def chart():
        fig, ax = figure(
            "Wall time of a three-turn run vs provider latency", "provider latency (ms)", "wall time (ms)"
        )
        xs = np.array(list(medians))
        ax.plot(xs, list(medians.values()), "o-", color=OURS, label="measured (median of 3)")
        ax.plot(xs, turns * xs, "--", color=CHAPTER, label="N × latency, N = 3")
        ax.legend()
        return fig

    rest = [w - turns * lat for lat, w in medians.items()]
    return Outcome(
        rows=rows,
        finding=(
            f"Wall time grows {slope:.2f} ms per ms of provider latency — N = {turns} turns times the "
            f"latency — and everything else (harness, loopback, the mock's own work) adds "
            f"{statistics.median(rest):.0f} ms to the three-turn run (chapter: ~15 ms for the harness)."
        ),
        ours=f"slope {slope:.2f} (N = 3); rest ≈ {statistics.median(rest):.0f} ms per run",
        chapter="wall ≈ N × latency; the harness adds ~15 ms to a three-turn run",
        notes=[
            "Wall-clock figures: medians of three runs each, rounded to 1 ms; they vary between runs. "
            "`make bench` measures the harness's own overhead per turn separately."
        ],
        chart=chart,
        checks={
            "every run: three turns, completed": all(
                (r.state.turns, r.state.status) == (3, "completed") for r in every
            ),
            "slope ≈ N turns": abs(slope - turns) < 0.15,
            "wall ≥ N × latency at every latency": all(r >= 0 for r in rest),
            "the rest stays small (< 100 ms)": max(rest) < 100,
        },
        data={"slope": slope},
    )
