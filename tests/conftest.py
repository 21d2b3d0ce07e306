"""Shared factory fixtures: scripted providers served by real uvicorn on loopback ports."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from mockprovider.server import serve_in_thread

API_KEY = "secret"


@pytest.fixture(scope="session")
def mock_url() -> Iterator[str]:
    """Base URL (`http://127.0.0.1:PORT/v1`) of one default mock shared by the whole session."""
    with serve_in_thread() as url:
        yield url


@pytest.fixture(scope="session")
def keyed_mock_url() -> Iterator[str]:
    """Base URL of a mock that requires `Authorization: Bearer secret`."""
    with serve_in_thread(api_key=API_KEY) as url:
        yield url


@pytest.fixture
def serve_mock() -> Callable[..., AbstractContextManager[str]]:
    """Factory: `with serve_mock(max_body_bytes=...) as url:` serves a mock built with those options."""
    return serve_in_thread
pytest_plugins = ("pgserver", "store_support")
