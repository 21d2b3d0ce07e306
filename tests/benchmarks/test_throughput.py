
"""Requests per second at 64 keep-alive connections, and uvicorn's server stacks compared.

Each figure comes from `experiments.bench.load`: the mock as its own process(es), a lean asyncio
client in another, a bounded run. `make test` runs one short configuration of each as a smoke
test; `make bench` runs them all and `experiments.bench.page` turns them into tables.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from experiments.bench.load import measure

pytestmark = pytest.mark.slow

PURE, FAST, OURS = ("asyncio", "h11"), ("uvloop", "httptools"), ("uvloop", "auto")


def test_throughput_by_workers_and_turn(benchmark):
    seconds = 0.3 if benchmark.disabled else 3.0
    configs = [(1, 1)] if benchmark.disabled else [(w, t) for t in (1, 100) for w in (1, 2)]

    def run():
        return [measure(workers=w, turn=t, connections=64, seconds=seconds) for w, t in configs]

    rows = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["throughput"] = [asdict(r) for r in rows]
    assert all(r.errors == 0 and r.requests_per_s > 0 for r in rows)


def test_server_stacks_on_the_same_bodies(benchmark):
    """asyncio+h11, uvloop+httptools and uvloop with the mock's own protocol (`--http auto`),
    alternated twice so a noisy neighbour hits each."""
    seconds = 0.3 if benchmark.disabled else 2.0
    shapes = [(1, 1)] if benchmark.disabled else [(t, c) for t in (1, 100) for c in (1, 64)]
    rounds = 1 if benchmark.disabled else 2

    def run():
        return [
            measure(workers=1, turn=t, connections=c, seconds=seconds, loop=loop, http=http)
            for _ in range(rounds)
            for t, c in shapes
            for loop, http in (PURE, FAST, OURS)
        ]

    rows = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["server stacks"] = [asdict(r) for r in rows]
    assert all(r.errors == 0 and r.requests_per_s > 0 for r in rows)
