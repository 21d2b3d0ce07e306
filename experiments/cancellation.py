"""11. Cancellation into tools: Stop during the slow `scan_archive`, with and without the signal."""

from __future__ import annotations

import asyncio
import time

from experiments.common import CHAPTER, LIMIT, OURS, Env, Outcome, figure, options, run_scenario
from harness import Cancel, Limits

WALL_CLOCK = True
"""Timed: runs after the arithmetic experiments, with only its wall-clock peers."""
NAME = "cancellation"
TITLE = "11 · Cancellation into tools: `slow`, Stop at 1.2 s"
REASON = "user pressed Stop"


async def _scan(env: Env, run_id: str, *, seconds: float, stop_at: float | None, reaches_tools: bool) -> dict:
    cancel = Cancel()
    marks: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    opts = options(
        env,
        "slow",
        run_id,
        limits=Limits(max_turns=5),
        cancel=cancel,
        signal_reaches_tools=reaches_tools,
        scan_seconds=seconds,
        on_progress=lambda p: marks.append(((time.perf_counter() - t0) * 1000, p.label)),
    )
    stopped_at: list[float] = []

    async def press_stop() -> None:
        await asyncio.sleep(stop_at)
        stopped_at.append((time.perf_counter() - t0) * 1000)
        cancel.set(REASON)

    presser = asyncio.create_task(press_stop()) if stop_at is not None else None
    r = await run_scenario(env, "slow", run_id=run_id, opts=opts)
    total = (time.perf_counter() - t0) * 1000
    if presser:
        presser.cancel()
    stop = r.state.interruption
    return {
        "total_ms": total,
        "status": r.state.status,
        "reason": getattr(stop, "reason", ""),
        "stop_ms": stopped_at[0] if stopped_at else None,
        "progress": marks,
    }


async def measure(env: Env) -> Outcome:
    seconds, stop_at = (1.0, 0.4) if env.fast else (3.0, 1.2)
    plain, stopped, http_only = await asyncio.gather(
        _scan(env, "slow-plain", seconds=seconds, stop_at=None, reaches_tools=True),
        _scan(env, "slow-stop", seconds=seconds, stop_at=stop_at, reaches_tools=True),
        _scan(env, "slow-http-only", seconds=seconds, stop_at=stop_at, reaches_tools=False),
    )
    gap = stopped["total_ms"] - stopped["stop_ms"]
    late = http_only["total_ms"] - http_only["stop_ms"]
    first_two = plain["progress"][:2]

    def row(label: str, r: dict, chapter: str) -> dict:
        return {
            "run": label,
            "stopped_after_ms": round(r["total_ms"], -1),
            "status": r["status"],
            "reason": r["reason"],
            "stop_pressed_ms": round(r["stop_ms"], -1) if r["stop_ms"] else "",
            "chapter": chapter,
        }

    rows = [
        row("no cancellation", plain, "~3,015 ms, completed"),
        row(
            f"Stop at {stop_at} s, signal reaches the tool",
            stopped,
            '~1,202 ms, interrupted, "user pressed Stop"',
        ),
        row(f"Stop at {stop_at} s, signal passed only to HTTP", http_only, "waits the whole tool"),
    ]
    progress_rows = [
        {
            "run": "progress (no cancellation)",
            "stopped_after_ms": round(ms, -1),
            "status": label,
            "reason": "",
            "stop_pressed_ms": "",
            "chapter": c,
        }
        for (ms, label), c in zip(
            plain["progress"], ("200/1200 at ~506 ms", "400/1200 at ~1,007 ms", "", "", "", ""), strict=False
        )
    ]

    def chart():
        fig, ax = figure("Timeline: Stop during `scan_archive`", "time since start (ms)", "")
        runs = [
            ("no cancel", plain, CHAPTER),
            ("Stop → tool", stopped, OURS),
            ("Stop → HTTP only", http_only, LIMIT),
        ]
        for y, (_, r, color) in enumerate(runs):
            ax.barh(y, r["total_ms"], color=color, alpha=0.6, height=0.5)
            ax.plot(
                [ms for ms, _ in r["progress"]], [y] * len(r["progress"]), "|", color="black", markersize=12
            )
            if r["stop_ms"]:
                ax.plot([r["stop_ms"]], [y], "v", color=LIMIT, markersize=10)
            ax.annotate(
                f"{r['total_ms']:,.0f} ms, {r['status']}",
                (r["total_ms"], y),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_yticks(range(len(runs)), [label for label, _, _ in runs])
        ax.margins(x=0.25)
        return fig

    return Outcome(
        rows=rows + progress_rows,
        table=rows,
        finding=(
            f"With the signal passed into the tool, Stop at {stop_at} s ends the run "
            f"{gap:.0f} ms later, interrupted with “{REASON}”; passed only to the HTTP call, the same "
            f"Stop waits {late:,.0f} ms for the tool to finish its work."
        ),
        ours=(
            f"no cancel {plain['total_ms']:,.0f} ms; Stop → {stopped['total_ms']:,.0f} ms "
            f"({gap:.0f} ms after); HTTP-only → {http_only['total_ms']:,.0f} ms"
        ),
        chapter="no cancel ~3,015 ms; Stop at 1.2 s → ~1,202 ms; HTTP-only waits the whole tool",
        notes=[
            "Progress (no cancellation): "
            + "; ".join(f"{label} at {ms:,.0f} ms" for ms, label in first_two)
            + " (chapter: 200 of 1200 at ~506 ms, 400 at ~1,007 ms). Wall-clock figures are rounded to "
            "10 ms; they vary a little between runs.",
        ],
        chart=chart,
        checks={
            "uncancelled scan completes": plain["status"] == "completed"
            and plain["total_ms"] >= seconds * 1000,
            "Stop ends the run within 50 ms, interrupted with the reason": stopped["status"] == "interrupted"
            and stopped["reason"] == REASON
            and gap <= 50,
            "HTTP-only signal waits for the tool": late >= (seconds - stop_at) * 1000 * 0.9,
            "progress every 200 files": [label for _, label in plain["progress"][:2]]
            == ["scanned 200 of 1200 files", "scanned 400 of 1200 files"],
        },
        data={"gap_ms": gap},
    )
