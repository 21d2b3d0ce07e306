"""Every experiment's fast path, against a real mock on loopback: each finding must hold."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from experiments import REGISTRY
from experiments.common import Env, write
from experiments.index import render
from harness import ModelClient


@pytest.fixture(scope="module")
def env(mock_url, tmp_path_factory) -> Env:
    return Env(base_url=mock_url, fast=True, workdir=tmp_path_factory.mktemp("experiments"))


_outcomes: dict = {}


def measure(name: str, env: Env):
    """Each experiment runs once per session; the explicit tests below reuse its outcome."""

    async def go():
        async with ModelClient(env.base_url) as client:
            return await REGISTRY[name].measure(replace(env, client=client))

    if name not in _outcomes:
        _outcomes[name] = asyncio.run(go())
    return _outcomes[name]


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
    ]


@pytest.mark.parametrize("name", list(REGISTRY))
def test_finding_holds(name, env, tmp_path):
    outcome = measure(name, env)
    assert outcome.checks, f"{name} checks nothing"
    assert not outcome.broken, f"{name}: {outcome.broken}\n{outcome.finding}\n{outcome.rows}"
    written = write(name, REGISTRY[name].TITLE, outcome, tmp_path)
    assert {p.suffix for p in written} >= {".csv", ".md"}
    assert outcome.finding in (tmp_path / f"{name}.md").read_text()
    assert name in render([(name, outcome)])


def cell(outcome, column: str, **match) -> object:
    row = next(r for r in outcome.rows if all(r.get(k) == v for k, v in match.items()))
    return row[column]


def test_turn_cap_input_grows_quadratically(env):
    o = measure("turn_cap", env)
    assert 3.6 <= o.data["in_ratio"] <= 4.0


def test_soft_budget_overshoots_under_one_turn_and_hard_never(env):
    rows = measure("budget", env).rows
    soft = [r for r in rows if r["mode"].startswith("soft")]
    hard = [r for r in rows if r["mode"].startswith("hard")]
    assert soft and all(0 < r["overshoot_usd"] <= r["last_turn_usd"] for r in soft)
    assert len(hard) >= 10 and all(r["spent_usd"] <= r["budget_usd"] for r in hard)


def test_only_the_descriptive_error_policy_answers(env):
    o = measure("tool_errors", env)
    answers = {r["policy"]: r["answer"] for r in o.rows}
    assert answers["descriptive"] == "errors.log mentions a timeout."
    assert "errors.log" not in answers["fatal"] + answers["generic"]


def test_dedupe_saves_one_tool_run_and_no_money(env):
    rows = {r["run"]: r for r in measure("dedupe", env).rows}
    repeat, deduped = rows["repeat"], rows["repeat + dedupe (read-only)"]
    assert repeat["tools"] - deduped["tools"] == 1
    assert float(deduped["cost"].lstrip("$")) >= float(repeat["cost"].lstrip("$"))


def test_empty_rejection_reports_a_deletion_that_never_happened(env):
    o = measure("rejection_wording", env)
    assert (
        cell(o, "the agent then told the user", rejected="with nothing")
        == "Deleted access.log to free space."
    )
    assert cell(o, "deleted", rejected="with nothing") == []
    assert cell(o, "access.log still there", rejected="with nothing") is True


def test_resumed_cost_equals_uninterrupted_cost(env):
    rows = measure("kill_resume", env).rows
    assert rows[0]["exit"] == -9
    assert rows[1]["cost"] == rows[2]["cost"] and rows[1]["status"] == "completed"


def test_cancellation_reaches_the_tool_within_50_ms(env):
    assert measure("cancellation", env).data["gap_ms"] <= 50


def test_wall_time_grows_by_n_times_latency(env):
    assert abs(measure("latency", env).data["slope"] - 3) < 0.15


def test_index_links_the_reports_other_targets_wrote(env, tmp_path):
    outcome = measure("plan", env)
    assert "bench.md" not in render([("plan", outcome)], tmp_path)
    (tmp_path / "bench.md").write_text("# Benchmarks\n")
    assert "[bench.md](bench.md)" in render([("plan", outcome)], tmp_path)
