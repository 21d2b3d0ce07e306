"""Every list-shaped field of every format costs work linear in its length.

The fast test counts the calls the mock makes (Python and C functions, a deterministic count)
for a request at n and at 10 n items; the slow one compares the CPU time at 3,000 and 30,000
items, which also sees one call per item copying every item before it (a quadratic field takes
about a hundred times as long at ten times the items).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import threading
import time

import httpx
import pytest
from list_fields import FIELDS

from mockprovider.app import create_app
from mockprovider.reading import memo

JSON = {"content-type": "application/json"}


def _answer(path: str, body: dict, profile) -> None:
    """Answer `body` in this process (a fresh app, a fresh event loop), under `profile` if given."""
    app = create_app(max_body_bytes=100_000_000)
    data = json.dumps(body).encode()
    memo.MEMORY.clear()  # a transcript remembered from an earlier request would cost less

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mock") as client:
            return await client.post(path, content=data, headers=JSON)

    threading.setprofile(profile)  # a fresh event loop's executor starts its threads afresh
    sys.setprofile(profile)
    try:
        response = asyncio.run(send())
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert response.status_code == 200, response.text


def _calls(path: str, body: dict) -> int:
    """The function calls the app makes answering `body` (its worker threads' included)."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    _answer(path, body, profile)
    return count


@pytest.mark.parametrize("field", FIELDS)
def test_ten_times_the_items_cost_at_most_about_ten_times_the_calls(field):
    small, large = (_calls(*FIELDS[field](n)) for n in (200, 2_000))
    assert large < 12 * small, f"{field}: {small} calls at 200 items, {large} at 2,000"


def _cpu_seconds(path: str, body: dict) -> float:
    """The CPU time the process spends answering `body` (every thread's: the app's workers too)."""
    gc.collect()  # the garbage of earlier requests is not this one's work
    started = time.process_time()
    _answer(path, body, profile=None)
    return time.process_time() - started


@pytest.mark.slow
@pytest.mark.parametrize("field", FIELDS)
def test_ten_times_the_items_cost_at_most_about_ten_times_the_cpu(field):
    # Catches what counting calls cannot: one call per item that copies all the items before it.
    # Linear fields measure about 10 times, quadratic ones 60 to 100 (the margin is for a shared
    # machine's noise).
    small = _cpu_seconds(*FIELDS[field](3_000))
    large = _cpu_seconds(*FIELDS[field](30_000))
    assert large < 40 * small, f"{field}: {small:.2f} s at 3,000 items, {large:.2f} s at 30,000"
