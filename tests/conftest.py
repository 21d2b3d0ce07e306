"""Shared factory fixtures: scripted providers served by real uvicorn on loopback ports."""

from __future__ import annotations

import importlib
import os
import ssl
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from mockprovider.server import serve_in_thread

API_KEY = "secret"


def _built_once(create: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    """`create` (an httpx-style create_ssl_context), answering the default case from a cache."""
    built: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def shared(verify: ssl.SSLContext | str | bool = True, cert=None, trust_env=True) -> ssl.SSLContext:
        if verify is not True or cert:
            return create(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in built:
            built[key] = create(verify=True, trust_env=trust_env)
        return built[key]

    return shared


@pytest.fixture(scope="session", autouse=True)
def one_trust_store() -> Iterator[None]:
    """Every httpx client the tests build (ours, and inside openai, anthropic, ollama...) shares
    one default SSL context. httpx (and httpx2, which the openai and anthropic SDKs use) loads
    the CA bundle for each new client, which costs more than most tests' loopback requests;
    verification itself is unchanged."""
    # Neither library has a hook for its default context; their transports call this name.
    with pytest.MonkeyPatch.context() as patch:
        for library in ("httpx", "httpx2"):
            try:
                transports = importlib.import_module(f"{library}._transports.default")
            except ImportError:
                continue
            patch.setattr(transports, "create_ssl_context", _built_once(transports.create_ssl_context))
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
pytest_plugins = ("pgserver", "store_support", "pytester")
