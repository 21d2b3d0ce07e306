"""Each lever of the harness's per-turn cost beside the plain code it replaced: same inputs, same
output, one run, interleaved (experiments/bench/harness_levers.py); `make bench` puts the rows on
results/bench.md."""

from __future__ import annotations

from dataclasses import asdict

from experiments.bench import harness_levers
from experiments.bench.tricks import check_same
from harness import MemoryStore, new_run
from harness.cancel import Cancel, Cancelled


def test_every_lever_gives_what_the_plain_code_gives(pg_url):
    chosen = harness_levers.levers(pg_url)
    try:
        for lever in chosen:
            check_same(lever.trick)  # raises, naming the lever and both outputs, if they differ
    finally:
        for lever in chosen:
            lever.close()


def test_the_plain_save_reads_the_layout_and_writes_a_statement_per_row():
    statements: list[str] = []
    store, state = MemoryStore(), new_run("t", run_id="plain")
    with harness_levers._one_row_per_statement():
        store.save(state)
        state.messages += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]
        store._conn.set_trace_callback(statements.append)
        store.save(state)
    assert sum("SELECT version FROM harness_schema" in s for s in statements) == 1
    assert sum("INSERT INTO run_items" in s for s in statements) == 2
    assert store.load("plain").messages == state.messages


def test_the_plain_side_of_the_json_rows_lever_sends_text_arrays_then_the_document_again(pg_url, monkeypatch):
    from harness.store import postgres

    sent: list[tuple[str, tuple]] = []
    kept = postgres.head_params

    def head_params(*args):  # called by the one-statement save with its statement chosen
        sent.append((postgres._APPEND_UNCLAIMED, postgres._item_params([("messages", 1, '"a"')])))
        return kept(*args)

    monkeypatch.setattr(postgres, "head_params", head_params)
    store = harness_levers._text_arrays(postgres.PostgresStore(pg_url))
    try:
        state = new_run("t", run_id="text-arrays")
        store.save(state)
        state.messages.append({"role": "assistant", "content": 'a "b" \\ {c}'})
        store.save(state)
        assert store.load("text-arrays").messages == state.messages
    finally:
        store.close()
    assert sent and "unnest(%s::text[], %s::integer[], %s::text[])" in sent[-1][0]
    assert sent[-1][1] == (["messages"], [1], ['"a"'])
    assert "json_array_elements" in postgres._APPEND_UNCLAIMED
    assert postgres._item_params([("messages", 1, '"a"')]) == ('[["messages",1,"\\"a\\""]]',)


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


def test_harness_levers(benchmark, pg_url):
    """The figures for results/bench.md: each lever's time with and without it, per turn saved."""
    rounds = 3 if benchmark.disabled else 30
    rows = benchmark.pedantic(lambda: harness_levers.lever_rows(harness_levers.levers(pg_url), rounds=rounds),
                              rounds=1, iterations=1)
    benchmark.extra_info["harness levers"] = [asdict(r) for r in rows]
    assert len(rows) == 8 and all(r.with_us > 0 and r.without_us > 0 for r in rows)

