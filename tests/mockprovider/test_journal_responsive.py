"""`GET /journal` with filters, on a journal full to its byte cap, never holds `/healthz` up."""

from __future__ import annotations

import json

import httpx
import pytest
from mock_support import P99_BOUND_S, p99_while

from experiments.lab.servers import mock_server
from mockprovider.journal import MAX_BYTES

FILTERS = ["model=plan", "model=missing", "kind=mcp", "tool=read_file", "test_id=nobody", "path=/v1/messages"]
JSON = {"content-type": "application/json"}


def _fill(client: httpx.Client) -> None:
    """Two requests for `plan`, then nearly MAX_BYTES of bodies of many small messages each (for
    a model the mock does not serve: refused at once, and journalled all the same)."""
    hello = {"model": "plan", "messages": [{"role": "user", "content": "x"}]}
    for _ in range(2):
        assert client.post("/v1/chat/completions", json=hello).status_code == 200
    messages = [{"role": "user", "content": f"message {i}"} for i in range(30_000)]
    body = json.dumps({"model": "other", "messages": messages}).encode()
    for _ in range(MAX_BYTES // len(body) - 2):
        assert client.post("/v1/chat/completions", content=body, headers=JSON).status_code == 404


@pytest.mark.slow
def test_healthz_keeps_answering_while_a_full_journal_is_filtered():
    pages: list[tuple[str, int, int]] = []

    def query(client: httpx.Client) -> None:
        for _ in range(3):
            for query in FILTERS:
                page = client.get(f"/journal?{query}")
                pages.append((query, page.status_code, len(page.json()["data"])))

    # The mock in its own process: a probe is timed against the server, never against this process.
    with mock_server("--journal", "1000", "--max-body-bytes", "2000000") as (url, _), \
            httpx.Client(base_url=url.removesuffix("/v1"), timeout=600) as client:
        _fill(client)
        assert len(client.get("/journal?model=other").content) > 0.9 * MAX_BYTES
        p99, probes = p99_while(url, query)
    assert {(query, status) for query, status, _ in pages} == {(query, 200) for query in FILTERS}
    assert {query: shown for query, _, shown in pages} == {query: 2 if query == "model=plan" else 0
                                                           for query in FILTERS}
    assert p99 < P99_BOUND_S, f"/healthz p99 {p99 * 1000:.0f} ms over {probes} probes"
