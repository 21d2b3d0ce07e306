"""Load: many concurrent `runaway` runs through the harness against one mock over loopback.

200 runs x cap 50 (10,000 requests) under RELIABILITY_FULL, 20 x cap 10 otherwise; once
against one uvicorn worker and once against two. Every run goes through `harness.run` with
one shared `ModelClient`; a timing transport under it records each request's latency
(request sent to body read) and every status. Zero errors means: every response a 200, no
transport error, no retry, and every run stopped at its cap with the same bill.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import httpx
import pytest
from reliability_support import FULL

from experiments.lab.servers import mock_process
from harness import Limits, ModelClient, OpenAIChat, new_run, run
from harness.chapter import SYSTEM, chapter_tools, make_sandbox

pytestmark = pytest.mark.slow

RUNS, CAP = (200, 50) if FULL else (20, 10)


class TimingTransport(httpx.AsyncBaseTransport):
    """Real loopback HTTP with a pool big enough for every run, timing each request."""

    def __init__(self, connections: int) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.inner = httpx.AsyncHTTPTransport(limits=limits)
        self.ms: list[float] = []
        self.statuses: list[int] = []
        self.errors: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.perf_counter()
        try:
            response = await self.inner.handle_async_request(request)
            await response.aread()
        except httpx.TransportError as e:
            self.errors.append(f"{type(e).__name__}: {e}")
            raise
        self.ms.append((time.perf_counter() - t0) * 1000)
        self.statuses.append(response.status_code)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def _swarm(base_url: str, sandbox: Path) -> tuple[list, TimingTransport, float]:
    transport = TimingTransport(connections=RUNS)
    tools = chapter_tools(sandbox)
    async with ModelClient(base_url, transport=transport, max_retries=3, backoff_s=0.05) as client:
        model = OpenAIChat("runaway", client=client)
        task = "Which file mentions a timeout?"
        states = [new_run(task, system=SYSTEM, run_id=f"load-{i}") for i in range(RUNS)]
        t0 = time.perf_counter()
        done = await asyncio.gather(
            *(run(s, model=model, tools=tools, limits=Limits(max_turns=CAP)) for s in states)
        )
        return done, transport, time.perf_counter() - t0


@pytest.mark.parametrize("workers", [1, 2])
def test_concurrent_runaway_runs_through_one_mock_have_zero_errors(workers, tmp_path, ledger):
    sandbox = make_sandbox(tmp_path / "sandbox")
    with mock_process(workers=workers) as url:
        states, transport, wall_s = asyncio.run(_swarm(url, sandbox))
    bills = {round(s.cost_usd, 12) for s in states}
    stopped = [s for s in states if (s.status, s.turns) == ("max_turns_exceeded", CAP)]
    non_200 = sum(1 for st in transport.statuses if st != 200)
    errors = non_200 + len(transport.errors) + (RUNS - len(stopped)) + (len(bills) != 1)
    p50, p99 = percentile(transport.ms, 50), percentile(transport.ms, 99)
    ledger.record(
        f"load: {RUNS} concurrent runaway runs x cap {CAP}, {workers} worker(s)",
        f"{len(transport.ms)} requests",
        tried=RUNS * CAP,
        survived=sum(1 for st in transport.statuses if st == 200),
        lost=errors,
        detail=f"p50 {p50:.1f} ms; p99 {p99:.1f} ms; max {max(transport.ms):.1f} ms; wall {wall_s:.1f} s; "
        f"{len(transport.ms) / wall_s:.0f} req/s; runs at cap {len(stopped)}/{RUNS}",
        metrics={
            "workers": workers,
            "runs": RUNS,
            "cap": CAP,
            "requests": len(transport.ms),
            "errors": errors,
            "p50_ms": round(p50, 1),
            "p99_ms": round(p99, 1),
            "max_ms": round(max(transport.ms), 1),
            "wall_s": round(wall_s, 1),
        },
    )
    assert not transport.errors, transport.errors[:5]
    assert non_200 == 0 and len(transport.ms) == RUNS * CAP, f"{non_200} non-200 of {len(transport.ms)}"
    assert len(stopped) == RUNS and len(bills) == 1, {(s.status, s.turns, s.error) for s in states}
