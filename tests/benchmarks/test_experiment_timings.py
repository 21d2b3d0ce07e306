"""The wall-clock figures of the experiments, recorded by `make bench`, never asserted.

How soon Stop reaches a tool, how much a provider's latency multiplies, how soon one Stop ends
a tree of runs: these are speeds, so they live here as `extra_info` beside their targets. Under
`make test` (benchmarks disabled) each body runs once and checks only what ran.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from experiments.chapter import cancellation, latency, subagent
from experiments.lab.runs import Env
from harness import ModelClient
from mockprovider.server import serve_in_thread


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with serve_in_thread() as url:
        yield Env(base_url=url, fast=True, workdir=tmp_path_factory.mktemp("timings"))


def _measure(module, env: Env):
    async def go():
        async with ModelClient(env.base_url) as client:
            return await module.measure(replace(env, client=client))

    return asyncio.run(go())


def test_cancellation_reaches_the_tool(benchmark, env):
    m = benchmark.pedantic(_measure, args=(cancellation, env), rounds=1, iterations=1)
    benchmark.extra_info["Stop → run stopped, ms (chapter 2; target ≤ 50)"] = round(m.gap_ms, 1)
    benchmark.extra_info["HTTP-only Stop waited, ms (the tool's remaining work)"] = round(m.late_ms, 1)
    assert m.stopped.status == m.http_only.status == "interrupted"


def test_latency_multiplies_by_the_turns(benchmark, env):
    m = benchmark.pedantic(_measure, args=(latency, env), rounds=1, iterations=1)
    benchmark.extra_info["wall ms per ms of provider latency (target ≈ N = 3)"] = round(m.slope(), 2)
    benchmark.extra_info["three-turn run minus N × latency, ms (chapter ~15)"] = round(max(m.rest()), 1)
    assert m.turns == 3


def test_one_stop_ends_the_tree(benchmark, env):
    m = benchmark.pedantic(_measure, args=(subagent, env), rounds=1, iterations=1)
    benchmark.extra_info["sub-agent tree: Stop → both stopped, ms (target < 100)"] = round(m.stop_gap_ms, 1)
    assert m.tree.state.status == "interrupted"
