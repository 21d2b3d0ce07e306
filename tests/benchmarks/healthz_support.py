"""`/healthz` timed while a load runs: what the responsiveness benchmarks share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

Load = Callable[[str, threading.Event, list[int], int], None]
"""`load(url, stop, sent, index)`: one client sending until `stop`, appending to `sent` per answer."""


def healthz_under_load(url: str, load: Load, clients: int, seconds: float) -> tuple[list[float], int]:
    """/healthz latencies (s) while `clients` run `load` for `seconds`, and the requests they got answered."""
    stop, sent = threading.Event(), []
    loaders = [threading.Thread(target=load, args=(url, stop, sent, i)) for i in range(clients)]
    for t in loaders:
        t.start()
    latencies = []
    try:
        with httpx.Client(base_url=url.removesuffix("/v1"), timeout=30) as probe:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                started = time.perf_counter()
                assert probe.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.01)
    finally:
        stop.set()
        for t in loaders:
            t.join(timeout=120)
    return latencies, len(sent)
