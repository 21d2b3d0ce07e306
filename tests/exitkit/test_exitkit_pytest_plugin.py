"""`pytest --exitkit MODULE:ADAPTER` runs the cases as tests in another project's suite.

Slow: each starts a whole pytest process (with every plugin this environment installs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent  # as the conftest beside it: "conftest" names several modules


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # This checkout's kit first: the plugin is found by name, whatever checkout the install points at.
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1])]), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False)


@pytest.mark.slow
def test_a_failed_verdict_fails_its_test_with_the_evidence(tmp_path: Path) -> None:
    skip = "turn_cap,budget,permanent_error,approval,crash,cancellation,overhead"
    done = _pytest(tmp_path, "--exitkit", "broken_loops:SwallowsErrors", "--exitkit",
                   "exitkit.adapters.plain:PlainLoop", "--exitkit-skip", skip)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED ::exitkit[broken_loops:SwallowsErrors-tool_error]" in done.stdout
    assert '"text sent back": ""' in done.stdout  # the figures and the evidence, in the failure
    assert '"reply": "I could not read the file, so I do not know."' in done.stdout
    assert "1 failed, 1 passed" in done.stdout


@pytest.mark.slow
def test_a_limit_the_framework_lacks_is_a_skip_that_says_so(tmp_path: Path) -> None:
    skip = "turn_cap,budget,tool_error,permanent_error,crash,cancellation,overhead"
    done = _pytest(tmp_path, "-rs", "--exitkit", "exitkit.adapters.plain:PlainLoop", "--exitkit-skip", skip,
                   "--exitkit-out", "card")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "plain openai loop: none exists (no approval across processes)" in done.stdout
    assert "1 skipped" in done.stdout
    card = (tmp_path / "card" / "report.md").read_text()
    assert "| plain openai loop | NONE EXISTS (no approval across processes) |" in card


@pytest.mark.slow
def test_an_adapter_named_twice_is_collected_once_per_case(tmp_path: Path) -> None:
    spec = "exitkit.adapters.plain:PlainLoop"
    done = _pytest(tmp_path, "--collect-only", "--exitkit", spec, "--exitkit", spec, "--exitkit-skip",
                   "budget,tool_error,permanent_error,approval,crash,cancellation,overhead")
    assert done.stdout.count(f"exitkit[{spec}-turn_cap]") == 1, done.stdout


@pytest.mark.slow
def test_a_command_agent_gets_a_test_per_case_beside_a_python_adapter(tmp_path: Path) -> None:
    import shlex

    line = shlex.join([sys.executable, str(HERE / "command_agents" / "minimal.py")])
    skip = "turn_cap,budget,approval,crash,cancellation,overhead"
    done = _pytest(tmp_path, "--exitkit-command", line, "--exitkit", "exitkit.adapters.plain:PlainLoop",
                   "--exitkit-skip", skip, "--exitkit-out", "card")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAILED ::exitkit[{line}-permanent_error]" in done.stdout
    assert "1 failed, 3 passed" in done.stdout
    card = (tmp_path / "card" / "report.md").read_text()
    assert "| minimal command agent | PASS · recovers" in card
