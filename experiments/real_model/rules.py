"""What "right" means for each of the six tasks: one rule per task, computed from the sandbox's files.

Pure functions of the answer, the run and the sandbox: no model needed to test them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from experiments.chapter.figures import REAL_MODEL
from experiments.lab.runs import Run

TASKS = tuple(task for task, _ in REAL_MODEL.tasks)
"""The chapter's six tasks, in its order."""


def _files(sandbox: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(sandbox.iterdir()) if p.is_file()}


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _readable(sandbox: Path) -> list[str]:
    return [n for n, p in _files(sandbox).items() if p.stat().st_mode & 0o444]


def _names_only(answer: str, sandbox: Path, wanted: set[str]) -> bool:
    """The answer names every wanted file and no other file of the sandbox."""
    named = {n for n in _files(sandbox) if n.lower() in answer.lower()}
    return named == wanted


def _timeout(answer: str, run: Run, sandbox: Path) -> bool:
    return _names_only(
        answer,
        sandbox,
        {n for n, p in _files(sandbox).items() if re.search(r"time(d)? ?out", _text(p), re.I)},
    )


_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def _count(answer: str, run: Run, sandbox: Path) -> bool:
    n = len(_files(sandbox))
    said = {int(d) for d in re.findall(r"\b\d+\b", answer)}
    said |= {i for i, w in enumerate(_WORDS) if re.search(rf"\b{w}\b", answer, re.I)}
    return said == {n}


def _notes(answer: str, run: Run, sandbox: Path) -> bool:
    said = _text(sandbox / "notes.txt").strip().rstrip(".").removeprefix("Remember to ").lower()
    return bool(said) and said in answer.lower()


def _read_each(answer: str, run: Run, sandbox: Path) -> bool:
    # Judged by what ran, not by the prose: every readable file read, without an error.
    ok = {
        r.args.get("path")
        for r in run.state.tool_runs
        if r.tool == "read_file" and isinstance(r.args, dict) and r.ok
    }
    return bool(answer) and set(_readable(sandbox)) <= ok


def _largest(answer: str, run: Run, sandbox: Path) -> bool:
    files = _files(sandbox)
    return _names_only(answer, sandbox, {max(files, key=lambda n: files[n].stat().st_size)})


def _rotating(answer: str, run: Run, sandbox: Path) -> bool:
    return _names_only(
        answer, sandbox, {n for n, p in _files(sandbox).items() if re.search(r"\brotat", _text(p), re.I)}
    )


Rule = Callable[[str, Run, Path], bool]
RULES: dict[str, tuple[Rule, str]] = {
    TASKS[0]: (_timeout, "names exactly the file(s) whose text says timed out / timeout"),
    TASKS[1]: (_count, "states the number of files in the folder, and no other number"),
    TASKS[2]: (_notes, "repeats what notes.txt says (“rotate your logs”)"),
    TASKS[3]: (_read_each, "read_file ran without error on every readable file"),
    TASKS[4]: (_largest, "names exactly the largest file by bytes"),
    TASKS[5]: (_rotating, "names exactly the file(s) whose text mentions rotating"),
}


def is_right(task: str, answer: str, run: Run, sandbox: Path) -> bool:
    rule, _ = RULES[task]
    return rule(answer, run, sandbox)
