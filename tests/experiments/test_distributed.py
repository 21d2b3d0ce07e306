"""The distributed case, small: workers killed and paused at random lose no run and run each
approved call's effect exactly once (the same checks `make distributed` tabulates); a row out
of time reports its unfinished runs as unfinished, never as lost."""

import os
import random

import pytest

from experiments.beyond import distributed


@pytest.mark.slow
def test_killed_and_paused_workers_lose_no_run_and_repeat_no_effect(pg_server, mock_url, monkeypatch):
    monkeypatch.setattr(distributed, "RUNS_PER_WORKER", 3)
    row = distributed.measure_row(pg_server, mock_url, 2, random.Random(7), faults=True)
    assert row.runs == 6 and row.completed == row.runs and row.unfinished == 0, row
    assert row.lost == 0 and row.effects_not_once == 0, row
    assert row.approved_calls > 0 and row.kills + row.pauses > 0, row


@pytest.mark.slow
def test_the_queue_drains_after_the_faults_stop(pg_server, mock_url, monkeypatch):
    monkeypatch.setattr(distributed, "RUNS_PER_WORKER", 4)
    monkeypatch.setattr(distributed, "FAULT_SECONDS", 1.0)  # faults for a second, then a calm drain
    row = distributed.measure_row(pg_server, mock_url, 2, random.Random(3), faults=True)
    assert row.completed == row.runs and row.unfinished == row.lost == row.effects_not_once == 0, row


def test_a_row_out_of_time_reports_unfinished_runs_not_lost_ones(pg_server, mock_url, monkeypatch):
    monkeypatch.setattr(distributed, "RUNS_PER_WORKER", 3)
    monkeypatch.setattr(distributed, "DEADLINE_SECONDS", 0.5)  # too short for any run to finish
    monkeypatch.setattr(distributed, "FAULT_SECONDS", 0.25)
    row = distributed.measure_row(pg_server, mock_url, 1, random.Random(5), faults=False)
    assert row.unfinished == row.runs - row.completed > 0, row
    assert row.lost == 0 and row.effects_not_once == 0, row
    assert "unfinished" in distributed.table([row])[0]


def test_the_deadline_grows_with_the_machines_load(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (10.0, 9.0, 8.0))
    assert distributed.slowdown() == 5.0
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    assert distributed.slowdown() == 1.0
