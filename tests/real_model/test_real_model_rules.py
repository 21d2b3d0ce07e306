"""The answer rules of the real-model run: pure functions of the sandbox, no model needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.chapter.figures import REAL_MODEL
from experiments.lab.runs import Run
from experiments.real_model.rules import TASKS, is_right
from harness import MemoryTrace, new_run
from harness.chapter import make_sandbox
from harness.state import ToolRun


def _run(sandbox: Path, *reads: str) -> Run:
    state = new_run("task")
    state.tool_runs = [
        ToolRun(tool="read_file", args={"path": p}, call_id=f"c{i}", ok=True, ms=1.0)
        for i, p in enumerate(reads)
    ]
    return Run(state=state, trace=MemoryTrace(), sandbox=sandbox, wall_ms=0.0)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    return make_sandbox(tmp_path / "sandbox")


@pytest.mark.parametrize(
    ("task", "answer"),
    [
        (TASKS[0], "errors.log mentions a timeout: worker 7 timed out after 30000 ms."),
        (TASKS[1], "There are 4 files."),
        (TASKS[2], "It says: Remember to rotate your logs."),
        (TASKS[4], "The largest file is errors.log."),
        (TASKS[5], "Yes, notes.txt reminds you to rotate your logs."),
    ],
)
def test_a_right_answer_is_right(sandbox: Path, task: str, answer: str) -> None:
    assert is_right(task, answer, _run(sandbox), sandbox)


def test_the_chapters_answers_are_wrong_here(sandbox: Path) -> None:
    # The chapter's model named access.log as largest and counted three files; both stay wrong.
    for task in (TASKS[1], TASKS[4]):
        assert not is_right(task, dict(REAL_MODEL.tasks)[task][3], _run(sandbox), sandbox)
    assert not is_right(TASKS[0], "The file timeout.txt does not exist.", _run(sandbox), sandbox)


def test_naming_every_file_is_not_an_answer(sandbox: Path) -> None:
    assert not is_right(TASKS[4], "errors.log, access.log and notes.txt", _run(sandbox), sandbox)


def test_read_each_is_judged_by_what_ran(sandbox: Path) -> None:
    readable = ["access.log", "errors.log", "notes.txt"]  # private.key may not be opened
    assert is_right(TASKS[3], "Done.", _run(sandbox, *readable), sandbox)
    assert not is_right(TASKS[3], "Done.", _run(sandbox, "notes.txt"), sandbox)
