"""A rerun of the timed experiments leaves the committed files byte-identical: their wall-clock
figures go to `results/wall-clock/`, which git ignores."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from experiments import REGISTRY
from experiments.lab.report import WALL_CLOCK, outcome, write

ROOT = Path(__file__).resolve().parents[2]
TIMED = ("cancellation", "latency")


def _committed(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def test_the_timed_experiments_are_cancellation_and_latency():
    assert tuple(n for n, m in REGISTRY.items() if getattr(m, "WALL_CLOCK", False)) == TIMED


@pytest.mark.parametrize("name", TIMED)
def test_a_rerun_of_a_timed_experiment_rewrites_no_committed_byte(name, measure, env, tmp_path):
    passes = []
    for i in range(2):
        out = tmp_path / f"pass{i}"
        o = outcome(REGISTRY[name], measure(REGISTRY[name], env=replace(env, workdir=tmp_path / f"w{i}")))
        assert o.broken == []
        write(name, REGISTRY[name].TITLE, o, out)
        passes.append(out)
    first, second = (_committed(out) for out in passes)
    assert sorted(first) == [f"{name}.csv", f"{name}.md"]
    assert first == second
    timed = sorted(p.name for p in (passes[0] / WALL_CLOCK).iterdir())
    assert timed == [f"{name}.csv", f"{name}.md", f"{name}.png"]
    assert "ms" in (passes[0] / WALL_CLOCK / f"{name}.md").read_text()
    assert f"`results/{WALL_CLOCK}/{name}.md`" in first[f"{name}.md"].decode()


def test_git_ignores_the_wall_clock_folder():
    ignored = subprocess.run(["git", "check-ignore", "-q", f"results/{WALL_CLOCK}/latency.md"], cwd=ROOT)
    assert ignored.returncode == 0
