"""Fixtures of the mock's own tests (shared helpers live in `formats_support`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from mockprovider.app import create_app


@pytest.fixture(scope="session")
def in_process() -> Iterator[TestClient]:
    """The app in-process, no socket, for many generated requests; a 500 is returned, not raised."""
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client
