"""Memory stays bounded however many distinct large prompts the mock reads: the quick version.

The mock remembers transcripts (mockprovider/reading/memo.py) and token counts (o200k); both are
bounded. This test sends 100 distinct 1 MB prompts in-process: keeping them (text and parsed)
would need ~200 MB, more than the cap it asserts. The full-size soak, 10,000 distinct 1 MB
prompts to a real `python -m mockprovider` process with its RSS read from /proc, is
tests/benchmarks/test_memory_soak.py (minutes of o200k encoding, so it runs under `make bench`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import httpx
import pytest

from mockprovider import create_app
from mockprovider.reading import memo

PROMPTS = 100
RSS_GROWTH_CAP = 160 << 20
"""The transcript memory's budget (128 MB of its estimate) and room for the allocator."""
WORDS = "the quick brown fox jumps over the lazy dog "


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _body(n: int) -> bytes:
    content = f"prompt {n}: " + WORDS * (1_000_000 // len(WORDS) - 1)
    return json.dumps({"model": "plan", "messages": [{"role": "user", "content": content}]}).encode()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_rss_stays_bounded_over_many_distinct_1mb_prompts():
    async def run() -> tuple[int, int]:
        transport = httpx.ASGITransport(app=create_app(max_body_bytes=1_100_000))
        async with httpx.AsyncClient(transport=transport, base_url="http://mock") as client:
            baseline, peak = 0, 0
            for n in range(PROMPTS):
                response = await client.post(
                    "/v1/chat/completions", content=_body(n), headers={"content-type": "application/json"}
                )
                assert response.status_code == 200, response.text[:300]
                if n == 4:
                    baseline = _rss()  # after the first allocations settle
                peak = max(peak, _rss())
            return baseline, peak

    memo.MEMORY.clear()
    baseline, peak = asyncio.run(run())
    entries, held = memo.MEMORY.stats()
    assert held <= memo.MEMORY.max_bytes and entries >= 1  # it did remember, within its budget
    assert peak - baseline <= RSS_GROWTH_CAP, f"RSS grew {(peak - baseline) >> 20} MB"
    memo.MEMORY.clear()
