"""ModelClient over https: the shared trust store still verifies the provider's certificate,
and a caller's own transport (with its own trust) wins."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import httpx
import pytest

from harness import ModelClient
from harness.model import ProviderError
from mockprovider.server import serve_in_thread

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no trust store holds, and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: apt-get install openssl")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return str(cert), str(key)


@pytest.fixture(scope="module")
def https_mock(self_signed) -> str:
    cert, key = self_signed
    with serve_in_thread(uvicorn_options={"ssl_certfile": cert, "ssl_keyfile": key}) as url:
        yield url.replace("http://", "https://")


def _complete(url: str, **kw):
    async def main():
        async with ModelClient(url, max_retries=0, **kw) as c:
            return await c.complete(model="plan", messages=MESSAGES)

    return asyncio.run(main())


def test_a_model_client_rejects_a_certificate_it_does_not_trust(https_mock):
    with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED"):
        _complete(https_mock)


def test_a_callers_own_transport_with_its_own_trust_wins(https_mock, self_signed):
    trusted = ssl.create_default_context(cafile=self_signed[0])
    completion = _complete(https_mock, transport=httpx.AsyncHTTPTransport(verify=trusted))
    assert completion.message["role"] == "assistant"


def test_a_trust_store_named_after_the_first_client_is_the_one_the_next_client_uses(
        https_mock, self_signed, monkeypatch):
    with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED"):
        _complete(https_mock)
    monkeypatch.setenv("SSL_CERT_FILE", self_signed[0])
    assert _complete(https_mock).message["role"] == "assistant"
