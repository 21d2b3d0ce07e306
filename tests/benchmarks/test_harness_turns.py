"""Per-turn cost of the harness at 20 and 100 turns of `runaway`, against a raw httpx loop.

`make bench` turns these into the ratios of results/bench.md (per turn: median / turns): the
harness's turn-100 per-turn time over its turn-20 one (flat saves keep it near 1), and the
harness with each store and durability over the raw loop, each with its target
(`experiments.bench.overhead.TARGETS`), from one interleaved run.
"""

from __future__ import annotations

import asyncio

import pytest

from experiments.bench.overhead import FSYNC, TARGET_LOOPS, harness_loop, per_turn_runs, raw_loop
from harness.chapter import make_sandbox
from mockprovider import serve_in_thread

TURNS = (20, 100)


@pytest.fixture(scope="module")
def mock_url():
    with serve_in_thread() as url:
        yield url


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    return make_sandbox(tmp_path_factory.mktemp("turns-sandbox"))


@pytest.mark.parametrize("turns", TURNS)
def test_raw_loop_runaway(benchmark, mock_url, sandbox, turns):
    seconds = benchmark.pedantic(lambda: asyncio.run(raw_loop(mock_url, sandbox, turns)), rounds=5)
    benchmark.extra_info["turns"] = turns
    assert seconds > 0


@pytest.mark.parametrize("turns", TURNS)
@pytest.mark.parametrize("store", ["memory", "sqlite", "postgres"])
def test_harness_runaway(benchmark, mock_url, sandbox, turns, store, request):
    target = request.getfixturevalue("pg_url") if store == "postgres" else store
    seconds = benchmark.pedantic(lambda: asyncio.run(harness_loop(mock_url, sandbox, turns, target)),
                                 rounds=5)
    benchmark.extra_info["turns"] = turns
    assert seconds > 0


def test_harness_vs_raw_loop_interleaved(benchmark, pg_url):
    """The harness (MemoryStore; SQLiteStore at both durabilities; PostgresStore) and the raw loop,
    round by round against one mock, with one fsync measured in the same rounds: their ratios from
    one run, as `make bench-check` takes them (the rows above come from separate runs minutes
    apart, which a noisy machine moves apart)."""
    rounds = 1 if benchmark.disabled else 9
    runs = benchmark.pedantic(lambda: per_turn_runs(*TARGET_LOOPS, rounds=rounds, postgres=pg_url),
                              rounds=1, iterations=1)
    benchmark.extra_info["per_turn_runs"] = runs
    benchmark.extra_info["rounds"] = rounds
    assert set(runs) == set(TARGET_LOOPS) and FSYNC in runs
    assert all(len(seconds) == rounds and min(seconds) > 0 for seconds in runs.values())
