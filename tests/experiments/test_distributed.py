"""The distributed case, small: workers killed and paused at random lose no run and run each
approved call's effect exactly once (the same checks `make distributed` tabulates)."""

import random

import pytest

from experiments.beyond import distributed


@pytest.mark.slow
def test_killed_and_paused_workers_lose_no_run_and_repeat_no_effect(pg_server, mock_url, monkeypatch):
    monkeypatch.setattr(distributed, "RUNS_PER_WORKER", 3)
    row = distributed.measure_row(pg_server, mock_url, 2, random.Random(7), faults=True)
    assert row.runs == 6 and row.completed == row.runs, row
    assert row.lost == 0 and row.effects_not_once == 0, row
    assert row.approved_calls > 0 and row.kills + row.pauses > 0, row
