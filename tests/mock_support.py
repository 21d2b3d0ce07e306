"""A mock serving scenario functions a test writes itself (beside the built-in ones), and `/healthz`
timed while a load runs against a mock."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from mockprovider.app import create_app
from mockprovider.scripts.scenarios import Scenario
from mockprovider.server import serve_in_thread


@contextmanager
def serve_scripts(**scripts: Scenario) -> Iterator[str]:
    """Serve a mock whose model names are `scripts`' keywords; yield its `/v1` base URL."""
    app = create_app()
    app.state.config = dataclasses.replace(app.state.config, scenarios=scripts)
    with serve_in_thread(app) as url:
        yield url


PROBE_EVERY_S = 0.01
P99_BOUND_S = 0.5
"""`/healthz` is meant to answer within 100 ms at p99 whatever else the mock serves; the tests hold
it to five times that, room for a shared machine's noise (a mock that does a large request's
work on its event loop misses it by orders of magnitude)."""


def healthz_latencies(probe: httpx.Client, busy: Callable[[], bool]) -> list[float]:
    """/healthz latencies (s) while `busy()`, as a client asking every PROBE_EVERY_S sees them: a
    probe held up for a second also counts the hundred probes it held up, each for what was left
    of that second (without them, a server stalled for a second would count it once)."""
    latencies: list[float] = []
    while busy():
        started = time.perf_counter()
        assert probe.get("/healthz").status_code == 200
        took = time.perf_counter() - started
        latencies.extend(took - k * PROBE_EVERY_S for k in range(int(took / PROBE_EVERY_S) + 1))
        time.sleep(max(0.0, PROBE_EVERY_S - took))
    return latencies


def p99_while(url: str, send: Callable[[httpx.Client], None]) -> tuple[float, int]:
    """/healthz's p99 latency (s) and its probes while `send(client)` runs on its own thread."""
    root = url.removesuffix("/v1")
    with httpx.Client(base_url=root, timeout=600) as client, \
            httpx.Client(base_url=root, timeout=600) as probe:
        sender = threading.Thread(target=send, args=(client,))
        sender.start()
        try:
            latencies = healthz_latencies(probe, sender.is_alive)
        finally:
            sender.join()
    return sorted(latencies)[int(len(latencies) * 0.99)], len(latencies)
