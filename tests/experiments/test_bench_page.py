"""results/bench.md as `experiments.bench.page` renders it from pytest-benchmark's JSON."""

from __future__ import annotations

from experiments.bench.page import render


def test_memory_soak_figures_get_their_own_table():
    figures = {"prompts": 10_000, "growth, MB": 58.8, "cap on growth, MB": 208.0}
    report = {
        "benchmarks": [
            {
                "name": "test_rss_stays_bounded_over_10000_distinct_1mb_prompts",
                "stats": {"median": 480.0, "iqr": 0.0, "rounds": 1},
                "extra_info": {"memory soak": figures},
            }
        ]
    }
    page = render(report)
    section = page.split("## Memory under 10,000 distinct 1 MB prompts\n", 1)[1]
    assert "| prompts | 10,000 |" in section
    assert "| growth, MB | 58.8 |" in section
    assert "| cap on growth, MB | 208.0 |" in section
    assert "## Derived" not in page  # not also dumped as loose figures


def test_speed_tricks_get_their_own_table_with_ratio_and_share():
    rows = [
        {"trick": "reply written from a template", "where": "wire.render", "turn": 1, "with_us": 3.0,
         "without_us": 13.5, "ratio": 4.5, "rounds": 300, "share": 0.089},
        {"trick": "plain loops adding the API's headers", "where": "headers.adding", "turn": 1,
         "with_us": 3.5, "without_us": 3.9, "ratio": 1.11, "rounds": 300, "share": None},
    ]
    report = {"benchmarks": [{"name": "test_speed_tricks", "stats": {"median": 9.0, "iqr": 0.0, "rounds": 1},
                              "extra_info": {"speed tricks": rows}}]}
    section = render(report).split("## Speed tricks: what each one saves\n", 1)[1]
    template = "| reply written from a template | `wire.render` | turn 1 | 3.00 | 13.50 | 4.50× | 8.9% |"
    unused = "| plain loops adding the API's headers | `headers.adding` | turn 1 | 3.50 | 3.90 | 1.11× | — |"
    assert f"{template} 300 |" in section and f"{unused} 300 |" in section
    assert "## Derived" not in section


def test_every_harness_target_comes_from_the_interleaved_run_with_its_target():
    per_turn = {"raw-20": 0.002, "raw-100": 0.003, "harness-20": 0.0022, "harness-100": 0.0033,
                "sqlite-100": 0.0036, "sqlite-power-loss-100": 0.0045, "postgres-100": 0.0042,
                "fsync": 0.0006}
    runs = {name: [seconds] * 9 for name, seconds in per_turn.items()}
    report = {"benchmarks": [{
        "name": "test_harness_vs_raw_loop_interleaved", "stats": {"median": 9.0, "iqr": 0.0, "rounds": 1},
        "extra_info": {"per_turn_runs": runs, "rounds": 9},
    }]}
    page = render(report)
    run = "interleaved (9 rounds)"
    memory, raw = "harness + MemoryStore", "raw httpx loop, per turn"
    assert f"| {memory} / {raw} at 20 turns, {run} | 1.10× | ≤ 1.2 |" in page
    assert f"| {memory} / {raw} at 100 turns, {run} | 1.10× | ≤ 1.2 |" in page
    assert f"| {memory}, per turn at 100 turns / at 20 turns, {run} | 1.50× | ≤ 1.3 |" in page
    sqlite = "harness + SQLiteStore, durability"
    assert f"| {sqlite} process-crash (the default) / {raw} at 100 turns, {run} | 1.20× | ≤ 1.3 |" in page
    # power-loss may add one fsync per turn: 0.6 ms on a 3 ms raw turn is 0.2x more.
    assert (f"| {sqlite} power-loss / {raw} at 100 turns, {run} | 1.50× | "
            "≤ 1.3 + one fsync per turn (0.20×) = 1.50 |") in page
    assert f"| harness + PostgresStore / {raw} at 100 turns, {run} | 1.40× | ≤ 1.5 |" in page
    assert "| one fsync on this machine" in page and "| 0.60 ms | — |" in page
    assert "## Derived" not in page  # the raw figures are not also dumped as loose figures


def test_the_page_names_the_interpreter_and_its_build():
    """Two builds of one Python version time the same code differently: the build is named."""
    machine = {"cpu": {"brand_raw": "AMD EPYC", "count": 2}, "python_implementation": "CPython",
               "python_version": "3.11.2", "python_build": ["main", "Apr 28 2025 14:11:48"],
               "python_compiler": "GCC 12.2.0"}
    page = render({"benchmarks": [], "machine_info": machine})
    assert "Machine: AMD EPYC, 2 cores, CPython 3.11.2 (built Apr 28 2025 14:11:48, GCC 12.2.0)." in page
    assert "Machine: ?, ? cores, Python ?." in render({"benchmarks": []})
