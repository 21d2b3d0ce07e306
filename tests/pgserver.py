"""A throwaway PostgreSQL server for the test session: the machine's own server binaries,
`initdb` in a temporary folder, started as an unprivileged user, reached over a unix socket
in that folder (no TCP port at all). `.ci/run` makes sure the binaries exist."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

USER = "postgres"
"""The unprivileged account the server runs as when the tests run as root (Debian creates it)."""


def _bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _as_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", USER, "--", *argv]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A libpq URL for a fresh server's `postgres` database (a unix socket in a temp folder)."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.fail("PostgreSQL server binaries not found: apt-get install postgresql (.ci/run does)")
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam(USER)
        os.chown(root, account.pw_uid, account.pw_gid)
    data = root / "data"
    subprocess.run(_as_user([initdb, "-D", str(data), "-U", "harness", "--auth=trust", "-E", "UTF8",
                             "--no-sync"]), check=True, capture_output=True, timeout=120)
    options = f"-k {root} -c listen_addresses='' -c fsync=off -c max_connections=100"
    subprocess.run(_as_user([pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w",
                             "-t", "60", "start"]), check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql://harness@/postgres?host={root}"
    finally:
        subprocess.run(_as_user([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A URL for a new, empty database on the session's server (one per test)."""
    yield new_database(pg_server)


def new_database(server: str) -> str:
    """A new empty database on `server`; its URL."""
    import psycopg

    name = f"t{os.urandom(6).hex()}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.replace("/postgres?", f"/{name}?")
