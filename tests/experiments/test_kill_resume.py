
"""Kill and resume reruns: the same workdir twice gives the same figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from experiments.chapter import kill_resume

pytestmark = pytest.mark.slow


def test_kill_resume_can_be_rerun_in_the_same_workdir(measure, env, tmp_path):
    same = replace(env, workdir=tmp_path)
    first, second = measure(kill_resume, env=same), measure(kill_resume, env=same)
    assert kill_resume.checks(second) == kill_resume.checks(first)
    assert all(kill_resume.checks(second).values())
    assert second.wal.delete_executions == first.wal.delete_executions
