"""Every experiment's fast path, against a real mock on loopback: each finding must hold."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace

import pytest

from experiments import REGISTRY
from experiments.lab.index import render
from experiments.lab.report import WALL_CLOCK, csv_text, outcome, write

pytestmark = pytest.mark.slow

_measured: dict = {}


@pytest.fixture
def measured(measure):
    """`measured(name)`: each experiment runs once per session; the tests reuse its measurement."""

    def get(name: str):
        if name not in _measured:
            _measured[name] = measure(REGISTRY[name])
        return _measured[name]

    return get


def test_every_measurement_of_the_chapter_has_an_experiment():
    assert list(REGISTRY) == [
        "plan",
        "turn_cap",
        "budget",
        "tool_errors",
        "permanent_error",
        "dedupe",
        "dedupe_writes",
        "approval",
        "rejection_wording",
        "kill_resume",
        "cancellation",
        "trace",
        "latency",
        "subagent",
        "arithmetic",
        "caching",
        "mcp_tool_errors",
        "mcp_permanent_error",
    ]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_finding_holds(name, measured, tmp_path):
    o = outcome(REGISTRY[name], measured(name))
    assert o.checks, f"{name} checks nothing"
    assert not o.broken, f"{name}: {o.broken}\n{o.prose.finding}\n{o.table.rows}"
    written = write(name, REGISTRY[name].TITLE, o, tmp_path)
    assert {p.suffix for p in written} >= {".csv", ".md"}
    if o.table.steady is None:
        assert o.prose.finding in (tmp_path / f"{name}.md").read_text()
    else:  # timed: the committed table states the finding without its figures, the wall-clock one with
        assert o.prose.headline in (tmp_path / f"{name}.md").read_text()
        assert o.prose.finding in (tmp_path / WALL_CLOCK / f"{name}.md").read_text()
    assert name in render([(name, o)])


def _whole(cell: str) -> bool:
    try:
        return float(cell).is_integer()
    except ValueError:
        return False


@pytest.mark.parametrize("name", list(REGISTRY))
def test_whole_numbers_are_written_as_integers_in_the_csv(name, measured):
    """Any column whose every value is a whole number (counts, ms) is written without a `.0`."""
    o = outcome(REGISTRY[name], measured(name))
    rows = list(csv.DictReader(io.StringIO(csv_text(o.table.rows))))
    for column in rows[0] if rows else []:
        cells = [r[column] for r in rows if r.get(column)]
        if cells and all(_whole(c) for c in cells):
            assert all(c.lstrip("-").isdigit() for c in cells), f"{name}.{column}: {cells}"


def test_plan_output_is_the_two_calls_and_the_answer(measured):
    m = measured("plan")
    assert m.call_tokens == [23, 29]
    assert m.run.state.completion_tokens == 23 + 29 + m.counted_replies[-1]


def test_turn_cap_ratio_is_what_our_a_over_g_predicts(measured):
    m = measured("turn_cap")
    assert m.inputs(100) / m.inputs(50) == m.early.input_ratio(100, 50)
    assert 2 < m.early.input_ratio(100, 50) < 4


def test_only_the_descriptive_error_policy_answers(measured):
    m = measured("tool_errors")
    assert m.runs["descriptive"].state.answer == "errors.log mentions a timeout."
    assert "errors.log" not in (m.runs["fatal"].state.answer or "") + (m.runs["generic"].state.answer or "")


def test_empty_rejection_reports_a_deletion_that_never_happened(measured):
    m = measured("rejection_wording")
    assert m.silent.state.answer == "Deleted access.log to free space."
    assert m.silent.runs_of("delete_file") == []
    assert (m.silent.sandbox / "access.log").exists()


def test_resumed_cost_equals_uninterrupted_cost(measured):
    m = measured("kill_resume")
    assert m.plan.killed_rc == -9
    assert m.plan.final.cost_usd == pytest.approx(m.reference.state.cost_usd, abs=1e-12)


def test_index_links_the_reports_other_targets_wrote(measured, tmp_path):
    o = outcome(REGISTRY["plan"], measured("plan"))
    assert "bench.md" not in render([("plan", o)], tmp_path)
    (tmp_path / "bench.md").write_text("# Benchmarks\n")
    assert "[bench.md](bench.md)" in render([("plan", o)], tmp_path)


def test_a_rerun_changes_no_committed_file(measured, measure, env, tmp_path):
    """Two fast-path passes write the same bytes, outside the (ignored) wall-clock folder."""
    first, second = tmp_path / "first", tmp_path / "second"
    again = replace(env, workdir=tmp_path / "work")
    outcomes = {}
    for out, get in ((first, measured), (second, lambda n: measure(REGISTRY[n], env=again))):
        outcomes[out] = [(n, outcome(REGISTRY[n], get(n))) for n in REGISTRY]
        for name, o in outcomes[out]:
            write(name, REGISTRY[name].TITLE, o, out)
        (out / "README.md").write_text(render(outcomes[out], out))
    timed = {n for n, m in REGISTRY.items() if getattr(m, "WALL_CLOCK", False)}
    assert timed == {"latency", "cancellation"}
    changed = sorted(p.name for p in first.iterdir()
                     if p.is_file() and p.read_bytes() != (second / p.name).read_bytes())
    assert changed == []
    assert sorted(p.name.split(".")[0] for p in (first / WALL_CLOCK).iterdir()) == sorted([*timed] * 3)


def test_the_index_lists_every_experiment_in_the_registry(measured):
    page = render([(n, outcome(REGISTRY[n], measured(n))) for n in REGISTRY])
    rows = [line for line in page.splitlines() if "`python -m experiments " in line]
    assert len(rows) == len(REGISTRY)
    for name, module in REGISTRY.items():
        row = next((r for r in rows if f"`python -m experiments {name}`" in r), "")
        assert module.TITLE.split(" · ")[0] in row and f"[table]({name}.md)" in row, name


@pytest.mark.parametrize("name", ["tool_errors", "permanent_error", "dedupe"])
def test_the_index_explains_a_ratio_difference_with_numbers(name, measured):
    explained = outcome(REGISTRY[name], measured(name)).prose.explained
    number = r"with the chapter's first prompt \(\d+ tokens for our \d+\) our runs give \d+\.\d\d"
    assert re.search(number, explained), explained
