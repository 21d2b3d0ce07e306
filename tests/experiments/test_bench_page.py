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
