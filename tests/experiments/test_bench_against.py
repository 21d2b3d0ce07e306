"""`experiments.bench.against`: the mock timed beside another chat server on loopback, briefly."""

from __future__ import annotations

import re

import pytest

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
