"""Store fixtures for each kind: `make_store` (store objects), `store_url`, `store_for` (URLs);
`each_durability` for each durability."""

from __future__ import annotations

from pathlib import Path

import pytest
from pgserver import new_database

from harness import MemoryStore, SQLiteStore, open_store
from harness.store.durability import DURABILITIES, ENV


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def make_store(request, tmp_path):
    """Factory: a new store object on the same database each call (another process, in effect);
    the in-memory store has one database per object, so it hands back the same one."""
    opened = []

    def make(**kwargs):
        if request.param == "sqlite":
            store = SQLiteStore(tmp_path / "harness.db", **kwargs)
        elif request.param == "postgres":
            store = open_store(request.getfixturevalue("pg_url"), **kwargs)
        else:
            store = opened[0] if opened else MemoryStore(**kwargs)
        opened.append(store)
        return store

    yield make
    for store in {id(s): s for s in opened}.values():
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """A URL naming a fresh database of each kind that several processes can share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared' / 'harness.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture(params=["sqlite", "postgres"])
def store_for(request):
    """Factory: `store_for(folder)` is the URL of a fresh database for that folder's run (the same
    URL on every call with the same folder): a SQLite file in it, or a new PostgreSQL database."""
    urls: dict[Path, str] = {}

    def url(folder: Path) -> str:
        if folder not in urls:
            if request.param == "sqlite":
                urls[folder] = f"sqlite:///{folder.absolute() / 'harness.db'}"
            else:
                urls[folder] = new_database(request.getfixturevalue("pg_server"))
        return urls[folder]

    return url



@pytest.fixture(params=DURABILITIES)
def each_durability(request, monkeypatch) -> str:
    """Each durability in turn, for every store this process and the processes it starts open
    (through `$HARNESS_DURABILITY`, as a deployment would set it)."""
    monkeypatch.setenv(ENV, request.param)
    return request.param
