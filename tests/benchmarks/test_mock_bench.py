"""One mock request in-process and over loopback, at turns 1, 50 and 100, beside a bare floor."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import o200k as tokens
from mockprovider import create_app, serve_in_thread

HEADERS = {"content-type": "application/json"}


async def _bare_endpoint(request: Request) -> JSONResponse:
    body = json.loads(await request.body())
    return JSONResponse({"ok": True, "messages": len(body["messages"])})


def bare_app() -> Starlette:
    """The floor this stack allows: read and parse the same JSON body, answer small JSON."""
    return Starlette(routes=[Route("/v1/chat/completions", _bare_endpoint, methods=["POST"])])


@pytest.mark.parametrize("turn", [1, 50, 100])
def test_mock_request_in_process(benchmark, bodies, turn):
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://mock")

    def request() -> httpx.Response:
        return loop.run_until_complete(
            client.post("/v1/chat/completions", content=bodies[turn], headers=HEADERS)
        )

    try:
        assert benchmark(request).status_code == 200
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def test_mock_request_in_process_uncached_turn_100(benchmark, bodies):
    """The turn-100 request with the token-count cache emptied before every round."""
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://mock")

    def request() -> httpx.Response:
        return loop.run_until_complete(
            client.post("/v1/chat/completions", content=bodies[100], headers=HEADERS)
        )

    try:
        response = benchmark.pedantic(request, setup=tokens.clear_cache, rounds=50)
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
    assert response.status_code == 200


@pytest.fixture(scope="module")
def mock_url():
    with serve_in_thread() as url:
        yield url


@pytest.fixture(scope="module")
def bare_url():
    with serve_in_thread(bare_app()) as url:
        yield url


@pytest.mark.parametrize("turn", [1, 50, 100])
def test_mock_request_loopback(benchmark, bodies, mock_url, turn):
    with httpx.Client(base_url=mock_url) as client:
        response = benchmark(client.post, "/chat/completions", content=bodies[turn], headers=HEADERS)
    assert response.json()["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize("turn", [1, 100])
def test_bare_starlette_loopback(benchmark, bodies, bare_url, turn):
    with httpx.Client(base_url=bare_url) as client:
        response = benchmark(client.post, "/chat/completions", content=bodies[turn], headers=HEADERS)
    assert response.json()["ok"] is True
