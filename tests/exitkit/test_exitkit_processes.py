"""What an agent's processes may not do to the kit: hold its pipes, outlive their run, or block
it past its timeout whatever they do with signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from exitkit.contract import Approve
from exitkit.runner import Kit

HERE = Path(__file__).parent
CHILD_ENV = {"PYTHONPATH": os.pathsep.join((str(HERE), str(HERE.parent.parent))), "PATH": "/usr/bin:/bin"}


def _alive(pids_file: Path, within_s: float = 0.0) -> list[int]:
    """The helpers whose pids are in `pids_file` still alive `within_s` from now (a SIGKILL is
    delivered at once, but the process takes a moment to die)."""
    end = time.monotonic() + within_s
    while (alive := _alive_now(pids_file)) and time.monotonic() < end:
        time.sleep(0.05)
    return alive


def _alive_now(pids_file: Path) -> list[int]:
    pids = [int(p) for p in pids_file.read_text().split()] if pids_file.exists() else []
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        if state != "Z":  # a killed orphan stays a zombie where nothing reaps it (PID 1 in a container)
            alive.append(pid)
    return alive


def _kill(pids_file: Path) -> None:
    for pid in _alive(pids_file):
        os.kill(pid, signal.SIGKILL)


def test_the_cli_returns_when_the_cases_end_though_an_agent_left_a_process_on_its_pipes(tmp_path) -> None:
    helpers = tmp_path / "helpers"
    env = CHILD_ENV | {"EXITKIT_TEST_HELPERS": str(helpers)}
    try:
        done = subprocess.run([sys.executable, "-m", "exitkit", "run", "attack_loops:LeavesAHelper", "--only",
                               "tool_error", "--out", "card"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=25, env=env, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert (tmp_path / "card" / "report.json").exists()
        # What the run left behind ended with it.
        assert helpers.exists() and _alive(helpers, within_s=5) == []
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the CLI waited for the helper holding its pipes") from e
    finally:
        _kill(helpers)


def test_a_resume_that_returned_is_its_outcome_though_it_left_a_process_on_its_pipes(
        kit: Kit, tmp_path, monkeypatch) -> None:
    helpers = tmp_path / "helpers"
    monkeypatch.setenv("EXITKIT_TEST_HELPERS", str(helpers))
    quick = replace(kit, timeout_s=10.0, env=dict(os.environ))
    spec = "attack_loops:LeavesAHelperOnResume"
    setup = kit.setup("destructive", needs_approval=("delete_file",))
    try:
        kit.measure(spec, setup)  # stops for approval
        run = quick.child(spec, setup, decision=Approve())
        assert (run.returncode, run.outcome.status) == (0, "completed"), run.outcome
        assert _alive(helpers, within_s=5) == []
    finally:
        _kill(helpers)


KIT_TIMEOUT = """
import sys, tempfile
from dataclasses import replace
from pathlib import Path
from exitkit.card import run_case
from exitkit.loader import declared, load
from exitkit.runner import Kit
who = declared(sys.argv[1], load(sys.argv[1]))
with tempfile.TemporaryDirectory() as tmp, Kit.serve(Path(tmp)) as kit:
    result = run_case(replace(kit, timeout_s=2.0), who, "turn_cap")
print(result.verdict, result.figures["caller gets"], sep="\\n")
"""


@pytest.mark.parametrize("spec", ["attack_loops:IgnoresTheAlarm", "attack_loops:DisarmsTheAlarm"])
def test_a_run_blocking_the_event_loop_is_stopped_at_the_timeout_whatever_it_does_with_sigalrm(spec) -> None:
    try:
        done = subprocess.run([sys.executable, "-c", KIT_TIMEOUT, spec], capture_output=True, text=True,
                              timeout=30, env=CHILD_ENV, check=False)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the kit never stopped the run") from e
    assert done.returncode == 0, done.stderr[-2000:]
    verdict, said = done.stdout.splitlines()[-2:]
    assert verdict == "fail" and said.startswith("kit timeout · "), done.stdout


def test_a_run_forks_from_the_adapters_server_and_goes_on_in_new_interpreters_once_it_dies(kit: Kit) -> None:
    spec = "file_loop:FileLoop"
    first = kit.measure(spec, kit.setup("plan", max_turns=5))
    server = kit.servers[spec]
    assert server is not None and first.outcome.status == "completed"
    server.proc.kill()
    server.proc.wait()
    again = kit.measure(spec, kit.setup("plan", max_turns=5))
    assert again.outcome.status == "completed" and kit.servers[spec] is None
