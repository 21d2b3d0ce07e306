"""Each lever of the harness's per-turn cost beside the plain code it replaced: same inputs, same
output, one run, interleaved (experiments/bench/harness_levers.py); `make bench` puts the rows on
results/bench.md."""

from __future__ import annotations

from dataclasses import asdict

from experiments.bench import harness_levers
from experiments.bench.tricks import check_same
from harness.cancel import Cancel, Cancelled


def test_every_lever_gives_what_the_plain_code_gives():
    for lever in harness_levers.levers():
        check_same(lever.trick)  # raises, naming the lever and both outputs, if they differ


def test_both_sides_of_the_cancel_lever_stop_a_call_when_the_signal_is_set():
    import asyncio

    async def stopped(raced: bool) -> str:
        cancel = Cancel()
        asyncio.get_running_loop().call_later(0.01, cancel.set, "stop")

        async def forever() -> None:
            await asyncio.Event().wait()

        try:
            if raced:
                await harness_levers._raced(forever(), cancel)
            else:
                with cancel.cancels_this_task():
                    await forever()
        except Cancelled as e:
            return e.reason
        return "not stopped"

    assert asyncio.run(stopped(True)) == asyncio.run(stopped(False)) == "stop"


def test_harness_levers(benchmark):
    """The figures for results/bench.md: each lever's time with and without it, per turn saved."""
    rounds = 3 if benchmark.disabled else 30
    rows = benchmark.pedantic(lambda: harness_levers.lever_rows(harness_levers.levers(), rounds=rounds),
                              rounds=1, iterations=1)
    benchmark.extra_info["harness levers"] = [asdict(r) for r in rows]
    assert len(rows) == len(harness_levers.levers()) and all(r.with_us > 0 and r.without_us > 0 for r in rows)

