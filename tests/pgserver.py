"""A throwaway PostgreSQL server for the test session (`experiments.lab.postgres`): the machine's
own server binaries, initdb in a temporary folder, an unprivileged user, a unix socket only.
`.ci/run` makes sure the binaries exist."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from experiments.lab.postgres import new_database, throwaway_server

__all__ = ["new_database", "pg_server", "pg_url"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A libpq URL for a fresh server's `postgres` database (a unix socket in a temp folder)."""
    with throwaway_server() as url:  # no binaries: a RuntimeError saying how to install them
        yield url


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A URL for a new, empty database on the session's server (one per test)."""
    return new_database(pg_server)
