"""Shared factory fixtures: scripted providers served by real uvicorn on loopback ports."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from mockprovider.server import serve_in_thread

API_KEY = "secret"


@pytest.fixture(scope="session", autouse=True)
def one_trust_store() -> Iterator[None]:
    """Every httpx client the tests build (ours, and inside openai, anthropic, ollama...) shares
    one default SSL context. httpx loads the CA bundle for each new client, which costs more
    than most tests' loopback requests; verification itself is unchanged."""
    # httpx exposes no hook for its default context; its transports call this name.
    from httpx._transports import default

    original = default.create_ssl_context
    built: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def shared(verify: ssl.SSLContext | str | bool = True, cert=None, trust_env=True) -> ssl.SSLContext:
        if verify is not True or cert:
            return original(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in built:
            built[key] = original(verify=True, trust_env=trust_env)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(default, "create_ssl_context", shared)
        yield


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
