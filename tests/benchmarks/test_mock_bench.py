"""One mock request in-process and over loopback, at turns 1, 50 and 100, beside a bare floor.

The pytest-benchmark figures resend one body, which the mock answers from its transcript memory
like a retry; `test_mock_vs_floor_interleaved` measures the agent-loop case (each body new, its
previous turn answered) against the floor, request by request (experiments/bench/floor.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict

import httpx
import pytest

import o200k as tokens
from experiments.bench import floor as bench_floor
from experiments.bench.floor import UVICORNS, bare_app
from mockprovider import create_app, serve_in_thread
from mockprovider.reading import memo, transcript

HEADERS = {"content-type": "application/json"}


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
    """The turn-100 request with the transcript memory and the count caches emptied every round."""
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://mock")

    def request() -> httpx.Response:
        return loop.run_until_complete(
            client.post("/v1/chat/completions", content=bodies[100], headers=HEADERS)
        )

    try:
        response = benchmark.pedantic(request, setup=_forget, rounds=50)
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
    assert response.status_code == 200


CONVERSATIONS = 600


def test_mock_turn_100_of_600_conversations_in_process(benchmark):
    """Turn 100 of 600 conversations in flight (a round is their 600 requests), each answered at
    turns 98 and 99 first, one conversation after another as a loop over them sends: each round
    starts from the transcript memory those turns left, so it reads from memory only what it holds.
    (20 conversations when benchmarks are off: the test then only proves it runs.)"""
    conversations = 20 if benchmark.disabled else CONVERSATIONS
    template = {turn: bench_floor.request_body(turn) for turn in (98, 99, 100)}
    task = bench_floor.TASK.encode()
    bodies = {turn: [body.replace(task, b"%s #%05d" % (task, k)) for k in range(conversations)]
              for turn, body in template.items()}
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://mock")

    async def answer(turn: int) -> list[int]:
        return [(await client.post("/v1/chat/completions", content=body, headers=HEADERS)).status_code
                for body in bodies[turn]]

    memo.MEMORY.clear()
    try:
        for turn in (98, 99):
            loop.run_until_complete(answer(turn))
        left = list(memo.MEMORY._lru.values())

        def restore() -> None:
            memo.MEMORY.clear()
            for entry in left:
                memo.MEMORY.remember(entry)

        statuses = benchmark.pedantic(lambda: loop.run_until_complete(answer(100)), setup=restore, rounds=5)
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
    assert statuses == [200] * conversations
    entries, _ = memo.MEMORY.stats()
    memo.MEMORY.clear()
    assert entries == conversations  # one per conversation: none pushed out another


def _forget() -> None:
    tokens.clear_cache()
    memo.MEMORY.clear()
    transcript.forget_tools_counts()


@pytest.fixture(scope="module")
def mock_url():
    with serve_in_thread() as url:
        yield url


@pytest.fixture(scope="module")
def bare_url():
    with serve_in_thread(bare_app(), uvicorn_options=UVICORNS) as url:
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


def test_mock_vs_floor_interleaved(benchmark):
    """The mock against the bare floor (targets: <= 1.0x at turn 1 and at turn 100), one run, interleaved.

    1,000 conversations at turn 1 (a request is ~1 ms, so the median settles); 300 at turn 100,
    whose transcripts (~30 KB each) all fit the mock's transcript memory at once, as one
    conversation's previous turn does in a real loop.
    """
    samples = {1: 4, 100: 4} if benchmark.disabled else {1: 1000, 100: 300}

    def run():
        with bench_floor.servers() as servers:
            return [bench_floor.compare(servers, turn, samples=n) for turn, n in samples.items()]

    rows = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["floor"] = [asdict(r) for r in rows]
    assert all(r.mock_us > 0 and r.floor_us > 0 and r.reply_floor_us > 0 for r in rows)
