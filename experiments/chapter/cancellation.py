"""11. Cancellation into tools: Stop during the slow `scan_archive`, with and without the signal.

Its figures are wall-clock and move between reruns: they go to `results/wall-clock/`, and the
committed table keeps what ran. Its checks look only at that (progress lines, tool runs, status),
never at how long it took. `make bench` records the times.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from experiments.chapter import figures
from experiments.lab.charts import CHAPTER, LIMIT, OURS, figure
from experiments.lab.report import Prose, Table
from experiments.lab.runs import Env, new_cancel, run_scenario

WALL_CLOCK = True
"""Timed: runs after the arithmetic experiments, with only its wall-clock peers."""
NAME = "cancellation"
TITLE = "11 · Cancellation into tools: `slow`, Stop pressed mid-scan"
CH = figures.CANCELLATION
PROGRESS = [f"scanned {n} of 1200 files" for n in range(200, 1201, 200)]
"""What the scan reports when it runs to the end: every 200 of its 1,200 files."""


def ms10(ms: float) -> int:
    """Wall time to the nearest 10 ms, as a whole number (a CSV cell never reads 3100.0)."""
    return int(round(ms, -1))


@dataclass(frozen=True, kw_only=True)
class Scan:
    total_ms: float
    status: str
    reason: str
    stop_ms: float | None
    progress: list[tuple[float, str]]
    tool_runs: int


@dataclass(frozen=True, kw_only=True)
class Measured:
    seconds: float
    stop_at: float
    plain: Scan
    stopped: Scan
    """Stop pressed; the signal reaches the tool (unless broken)."""
    http_only: Scan

    @property
    def gap_ms(self) -> float:
        return self.stopped.total_ms - (self.stopped.stop_ms or 0.0)

    @property
    def late_ms(self) -> float:
        return self.http_only.total_ms - (self.http_only.stop_ms or 0.0)


async def _scan(env: Env, run_id: str, *, seconds: float, stop_at: float | None, deaf_tools: bool) -> Scan:
    cancel = new_cancel()
    marks: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    stopped_at: list[float] = []

    async def press_stop(after: float) -> None:
        await asyncio.sleep(after)
        stopped_at.append((time.perf_counter() - t0) * 1000)
        cancel.set(CH.reason)

    presser = asyncio.create_task(press_stop(stop_at)) if stop_at is not None else None
    r = await run_scenario(
        env,
        "slow",
        run_id=run_id,
        max_turns=5,
        cancel=cancel,
        deaf_tools=deaf_tools,
        on_progress=lambda label: marks.append(((time.perf_counter() - t0) * 1000, label)),
        scan_seconds=seconds,
    )
    total = (time.perf_counter() - t0) * 1000
    if presser:
        presser.cancel()
    return Scan(
        total_ms=total,
        status=r.state.status,
        reason=getattr(r.state.interruption, "reason", ""),
        stop_ms=stopped_at[0] if stopped_at else None,
        progress=marks,
        tool_runs=r.tool_runs,
    )


async def measure(env: Env, *, deaf_tools: bool = False) -> Measured:
    """`deaf_tools=True` hands the Stop to HTTP only in the stopped row too (broken)."""
    seconds, stop_at = (1.0, 0.4) if env.fast else (3.0, CH.stop_at_s)
    plain, stopped, http_only = await asyncio.gather(
        _scan(env, "slow-plain", seconds=seconds, stop_at=None, deaf_tools=False),
        _scan(env, "slow-stop", seconds=seconds, stop_at=stop_at, deaf_tools=deaf_tools),
        _scan(env, "slow-http-only", seconds=seconds, stop_at=stop_at, deaf_tools=True),
    )
    return Measured(seconds=seconds, stop_at=stop_at, plain=plain, stopped=stopped, http_only=http_only)


def table(m: Measured) -> Table:
    def row(label: str, s: Scan, chapter_says: str) -> dict:
        return {
            "run": label,
            "stopped_after_ms": ms10(s.total_ms),
            "status": s.status,
            "reason": s.reason,
            "stop_pressed_ms": ms10(s.stop_ms) if s.stop_ms else "",
            "progress_lines": len(s.progress),
            "chapter": chapter_says,
        }

    rows = [
        row("no cancellation", m.plain, f"~{CH.uncancelled_ms:,} ms, completed"),
        row(
            f"Stop at {m.stop_at} s, signal reaches the tool",
            m.stopped,
            f'~{CH.stopped_ms:,} ms, interrupted, "{CH.reason}"',
        ),
        row(f"Stop at {m.stop_at} s, signal passed only to HTTP", m.http_only, "waits the whole tool"),
    ]
    chapter_marks = [f"{label.split()[1]}/1200 at ~{ms:,} ms" for label, ms in CH.progress_ms]
    progress = [
        {
            "run": "progress (no cancellation)",
            "stopped_after_ms": ms10(ms),
            "status": label,
            "chapter": chapter_marks[i] if i < len(chapter_marks) else "",
        }
        for i, (ms, label) in enumerate(m.plain.progress)
    ]
    steady = [
        {
            "run": row["run"],
            "status": s.status,
            "reason": s.reason,
            "scan": "ran to the end" if [label for _, label in s.progress] == PROGRESS else "cut mid-scan",
            "chapter": row["chapter"],
        }
        for row, s in zip(rows, (m.plain, m.stopped, m.http_only), strict=True)
    ]
    return Table(rows=rows + progress, shown=rows, steady=steady)


def checks(m: Measured) -> dict[str, bool]:
    return {
        "uncancelled scan completes, reporting every 200 files": m.plain.status == "completed"
        and [label for _, label in m.plain.progress] == PROGRESS,
        "Stop reaches the tool: it stops mid-scan, the run interrupted with the reason": m.stopped.status
        == "interrupted"
        and m.stopped.reason == CH.reason
        and len(m.stopped.progress) < len(PROGRESS)
        and m.stopped.tool_runs == 0,
        "HTTP-only signal: the tool scans to the end before the run stops": m.http_only.status
        == "interrupted"
        and [label for _, label in m.http_only.progress] == PROGRESS,
    }


def prose(m: Measured) -> Prose:
    first_two = m.plain.progress[:2]
    return Prose(
        finding=(
            f"With the signal passed into the tool, Stop at {m.stop_at} s ends the run {m.gap_ms:.0f} ms "
            f"later, interrupted with “{CH.reason}”, the scan cut after {len(m.stopped.progress)} of "
            f"{len(PROGRESS)} progress lines; passed only to the HTTP call, the same Stop waits "
            f"{m.late_ms:,.0f} ms for the tool to finish its work."
        ),
        headline=(
            f"With the signal passed into the tool, Stop ends the run mid-scan, interrupted with "
            f"“{CH.reason}”; passed only to the HTTP call, the same Stop waits for the tool to finish "
            "its work."
        ),
        ours=f"no cancel {m.plain.total_ms:,.0f} ms; Stop → {m.stopped.total_ms:,.0f} ms ({m.gap_ms:.0f} ms "
        f"after); HTTP-only → {m.http_only.total_ms:,.0f} ms",
        chapter=f"no cancel ~{CH.uncancelled_ms:,} ms; Stop at {CH.stop_at_s} s → ~{CH.stopped_ms:,} ms; "
        "HTTP-only waits the whole tool",
        notes=[
            "Progress (no cancellation): "
            + "; ".join(f"{label} at {ms:,.0f} ms" for ms, label in first_two)
            + " (chapter: "
            + ", ".join(f"{label} at ~{ms:,} ms" for label, ms in CH.progress_ms)
            + "). Wall-clock figures are rounded to 10 ms and vary between runs; the checks look only "
            "at what ran, and `make bench` records the times.",
        ],
    )


def chart(m: Measured):
    fig, ax = figure("Timeline: Stop during `scan_archive`", "time since start (ms)", "")
    runs = [
        ("no cancel", m.plain, CHAPTER),
        ("Stop → tool", m.stopped, OURS),
        ("Stop → HTTP only", m.http_only, LIMIT),
    ]
    for y, (_, s, color) in enumerate(runs):
        ax.barh(y, s.total_ms, color=color, alpha=0.6, height=0.5)
        ax.plot([ms for ms, _ in s.progress], [y] * len(s.progress), "|", color="black", markersize=12)
        if s.stop_ms:
            ax.plot([s.stop_ms], [y], "v", color=LIMIT, markersize=10)
        ax.annotate(
            f"{s.total_ms:,.0f} ms, {s.status}",
            (s.total_ms, y),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(range(len(runs)), [label for label, _, _ in runs])
    ax.margins(x=0.25)
    return fig
