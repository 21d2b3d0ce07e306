"""`experiments.bench.against`: the mock timed beside another chat server on loopback, briefly."""

from __future__ import annotations

import os
import re

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from experiments.bench import against
from experiments.bench.floor import bare_app, reply_floor_app, request_body, teach
from mockprovider.server import serve_in_thread


def test_the_mock_in_its_own_process_is_timed_beside_another_server_on_the_same_bodies():
    other = reply_floor_app()  # answers a mock's chat completion, as another mock would
    with serve_in_thread(other) as url, against.clients(url) as (mock, client):
        teach(other, mock.post("/chat/completions", content=request_body(1, task="an imitated reply")))
        result = against.compare(mock, client, 3, samples=4)
    assert (result.turn, result.samples) == (3, 4)
    assert result.mock_us > 0 and result.other_us > 0
    assert result.ratio == pytest.approx(result.mock_us / result.other_us)
    assert result.paired > 0


def test_the_command_prints_each_turns_p50s_their_ratio_and_the_load(capsys):
    with serve_in_thread() as mock_url, serve_in_thread() as other_url:
        against.main(["--url", other_url, "--mock-url", mock_url, "--turns", "1", "2", "--samples", "3"])
    lines = capsys.readouterr().out.splitlines()
    pattern = r"turn {}: p50 mock [\d,]+ us, other [\d,]+ us; mock / other \d+\.\d+x .*3 samples\)"
    assert re.fullmatch(pattern.format(1), lines[0])
    assert re.fullmatch(pattern.format(2), lines[1])
    assert lines[2].startswith("load average: ")


def test_a_server_answering_without_a_chat_completion_stops_the_comparison_naming_it():
    with serve_in_thread(bare_app()) as url, serve_in_thread() as mock_url:
        with pytest.raises(RuntimeError, match="answered 200 without a chat completion"):
            against.main(["--url", url, "--mock-url", mock_url, "--turns", "1", "--samples", "2"])


def test_a_server_refusing_the_body_stops_the_comparison_with_its_status():
    with serve_in_thread(api_key="not-sent") as url, serve_in_thread() as mock_url:
        with pytest.raises(RuntimeError, match="answered 401"):
            against.main(["--url", url, "--mock-url", mock_url, "--turns", "1", "--samples", "2"])


def _chunked_app(*, close: bool = False) -> Starlette:
    """Answers a chat completion in two chunks of unknown total (as aimock does), optionally
    closing the connection after each answer."""

    async def endpoint(request: Request) -> StreamingResponse:
        await request.body()

        async def parts():
            yield b'{"object": "chat.completion", '
            yield b'"choices": [{"index": 0}]}'

        return StreamingResponse(parts(), media_type="application/json",
                                 headers={"connection": "close"} if close else None)

    return Starlette(routes=[Route("/v1/chat/completions", endpoint, methods=["POST"])])


def test_the_raw_client_reads_a_chunked_answer_whole():
    with serve_in_thread(_chunked_app()) as url, against.RawClient(url) as client:
        status, headers, content = client.post(request_body(1))
    assert status == 200 and headers[b"transfer-encoding"] == b"chunked"
    assert content == b'{"object": "chat.completion", "choices": [{"index": 0}]}'


def test_the_raw_client_reopens_a_connection_the_server_closed():
    with serve_in_thread(_chunked_app(close=True)) as url, against.RawClient(url) as client:
        answers = [client.post(request_body(1))[0] for _ in range(3)]
    assert answers == [200, 200, 200]


def test_the_raw_client_times_the_mock_beside_another_server_on_the_same_bodies():
    with serve_in_thread(_chunked_app()) as url, against.clients(url, kind="raw") as (mock, other):
        assert isinstance(mock, against.RawClient) and isinstance(other, against.RawClient)
        result = against.compare(mock, other, 2, samples=4)
    assert (result.turn, result.samples, result.client) == (2, 4, "raw")
    assert result.mock_us > 0 and result.other_us > 0


def test_with_connections_each_round_sends_that_many_bodies_at_once():
    with serve_in_thread() as mock_url, serve_in_thread(_chunked_app()) as url:
        with against.clients(url, mock_url, kind="raw") as (raw, other):
            result = against.compare(raw, other, 1, samples=6, connections=3)
        with against.clients(url, mock_url) as (mock, other):  # httpx's pool opens the connections
            pooled = against.compare(mock, other, 1, samples=4, connections=2)
    assert (result.connections, result.samples) == (3, 6)
    assert (pooled.connections, pooled.samples) == (2, 4)
    assert 1 < len(raw._opened) <= 3  # a connection per thread of the pool, which runs a round at once


def test_the_command_prints_each_servers_cpu_per_request_when_its_pid_is_known(capsys):
    with serve_in_thread() as other_url:  # served by this process: its pid is ours
        against.main(["--url", other_url, "--other-pid", str(os.getpid()), "--turns", "1", "--samples", "3",
                      "--client", "raw", "--connections", "2"])
    first = capsys.readouterr().out.splitlines()[0]
    assert re.fullmatch(r"turn 1: .*3 samples, raw client, 2 connections\); server CPU per request "
                        r"mock [\d,]+ us, other [\d,]+ us, mock / other \d+\.\d+x", first)


def test_a_process_cpu_time_grows_as_it_works():
    before = against.cpu_seconds(os.getpid())
    sum(range(3_000_000))
    assert against.cpu_seconds(os.getpid()) > before


def test_a_mock_pid_without_the_mock_url_is_refused(capsys):
    with pytest.raises(SystemExit):
        against.main(["--url", "http://127.0.0.1:9/v1", "--mock-pid", "1"])
    assert "--mock-pid names the process of the mock at --mock-url" in capsys.readouterr().err
