"""The README's "Runs in a database" section, run as written: the mock it starts, then its lines
against a real PostgreSQL (the session's throwaway server standing in for `db.internal`, a free
port for 8000 so parallel suites never collide, the package already installed)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest

from mockprovider.server import free_port

ROOT = Path(__file__).resolve().parents[2]
SECTION = re.compile(r"^## Runs in a database\n(.*?)^## ", re.S | re.M)
SHOWN_URL = "postgresql://harness@db.internal/harness"


def blocks() -> tuple[str, list[str]]:
    """The section's server line, and its other shell lines without their comments."""
    found = SECTION.search((ROOT / "README.md").read_text())
    assert found, "README.md has no section 'Runs in a database'"
    server, lines = re.findall(r"```sh\n(.*?)```", found[1], re.S)
    return server.strip(), [line.split("  #")[0].strip() for line in lines.strip().splitlines()]


def _ours(line: str, port: int) -> list[str]:
    """A README line as this interpreter runs it (`.venv/bin/harness X` is `python -m harness X`),
    with `port` for 8000."""
    program, *args = shlex.split(line.replace("8000", str(port)))
    if program == ".venv/bin/harness":
        return [sys.executable, "-m", "harness", *args]
    assert program == ".venv/bin/python", line
    return [sys.executable, *args]


def test_the_section_starts_the_mock_and_keeps_the_password_off_the_command_line():
    server, lines = blocks()
    assert server.startswith(".venv/bin/python -m mockprovider")
    assert lines[1] == f"export HARNESS_STORE={SHOWN_URL}"
    assert not any("--store" in line or "import-state" in line for line in lines)


def test_the_section_runs_as_written(pg_url, tmp_path):
    server, lines = blocks()
    install, export, *commands = lines
    assert install.startswith(".venv/bin/pip install ") and export.startswith("export HARNESS_STORE=")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_STORE": pg_url,
           "LLM_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    with subprocess.Popen(_ours(server, port), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as mock:
        try:
            _ready(f"http://127.0.0.1:{port}/healthz", mock)
            done = [subprocess.run(_ours(line, port), cwd=tmp_path, env=env, capture_output=True,
                                   text=True, timeout=120) for line in commands]
        finally:
            mock.terminate()
    (run, approve) = done
    assert run.returncode == 3, run.stdout + run.stderr
    assert 'interrupted / approval -> delete_file({"path": "access.log"})' in run.stdout
    assert approve.returncode == 0, approve.stdout + approve.stderr
    assert "Deleted access.log to free space." in approve.stdout
    assert not (tmp_path / "state" / "harness.db").exists()  # not the default SQLite file: PostgreSQL
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT run_id, status FROM runs").fetchall() == [("d1", "completed")]


def _ready(url: str, mock: subprocess.Popen) -> None:
    for _ in range(600):
        if mock.poll() is not None:
            pytest.fail(f"the mock exited: {mock.stderr.read() if mock.stderr else ''}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail(f"the mock never answered {url}")
