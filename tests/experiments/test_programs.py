"""The machine's programs the tests run are found with a user's `PATH` (no `/usr/sbin`), or named
with the package to install, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments.lab import programs
from experiments.lab.programs import MissingProgram, find_program, require_program

USER_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A login shell's `PATH` for an ordinary user on Debian: no sbin folder."""
ROOT = Path(__file__).resolve().parents[2]


def _executable(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_program_off_path_is_found_in_the_system_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(programs, "SYSTEM_FOLDERS", (str(tmp_path / "sbin"),))
    assert find_program("toolx") is None
    shipped = _executable(tmp_path / "sbin", "toolx")
    assert find_program("toolx") == str(shipped)


def test_of_several_versioned_folders_the_newest_major_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for version in ("9.6", "15", "13"):
        _executable(tmp_path / "pg" / version / "bin", "initdb")
    found = find_program("initdb", also=(str(tmp_path / "pg" / "*" / "bin"),))
    assert found == str(tmp_path / "pg" / "15" / "bin" / "initdb")


def test_a_file_that_cannot_be_run_is_not_a_program(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(programs, "SYSTEM_FOLDERS", (str(tmp_path),))
    (tmp_path / "toolx").write_text("not executable")
    assert find_program("toolx") is None


def test_a_missing_program_is_one_line_naming_the_package_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(programs, "SYSTEM_FOLDERS", (str(tmp_path),))
    with pytest.raises(MissingProgram) as caught:
        require_program("runuser", package="util-linux")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("runuser is not installed") and message.endswith("apt-get install util-linux")


def test_the_tests_postgresql_starts_with_a_users_path():
    """As root the server runs through `runuser`, which Debian keeps in /usr/sbin, off this `PATH`."""
    script = textwrap.dedent("""
        import psycopg
        from experiments.lab.postgres import throwaway_server
        with throwaway_server() as url, psycopg.connect(url) as conn:
            print(conn.execute("select 6 * 7").fetchone()[0])
    """)
    env = {**os.environ, "PATH": USER_PATH, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=180)
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr
