"""What an operator of a shared mock watches: `GET /metrics` in Prometheus's text format, and
`GET /readyz`.

Counted per server process, in the process's own registry (behind `--workers N` each worker
counts its own, as its journal does): requests by route (the route's template, never the raw
path, so model names in Gemini's URLs add no series), status and scenario (only names the mock
serves); the time to answer, as a histogram by route; faults injected, by kind; the journal's
size. Labels come from bounded sets only, so no client can grow the registry.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left

from prometheus_client import CollectorRegistry, Counter, Gauge, Metric
from prometheus_client import metrics as metrics_module
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCENARIO = "mockprovider.scenario"
"""The scope key where `steps.resolve` leaves the scenario a request was answered by."""
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: from a bare loopback reply to the longest scripted wait (five minutes)."""


REQUESTS, REQUESTS_HELP = "mockprovider_requests", "Requests answered, by route, status and scenario."
SECONDS, SECONDS_HELP = ("mockprovider_request_seconds",
                         "Time from the request to the end of the response, by route.")


class Metrics:
    """One app's instruments, in a registry of its own (many apps share a test process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = RequestSeries()
        self.registry.register(self.requests)
        self.faults = Counter("mockprovider_faults_injected", "Faults injected, by kind.", ("kind",),
                              registry=self.registry)
        self.journal_entries = Gauge("mockprovider_journal_entries", "Requests the journal holds.",
                                     registry=self.registry)
        self.journal_bytes = Gauge("mockprovider_journal_bytes", "Bytes the journal's entries count.",
                                   registry=self.registry)


_BOUNDS = (*BUCKETS, math.inf)
_LE = tuple(floatToGoString(b) for b in _BOUNDS)


class RequestSeries(Collector):
    """Requests by (route, status, scenario) and their times by route, as a `Counter` and a
    `Histogram` of prometheus_client would print them (the same samples, labels and order), kept
    as plain numbers under one lock and turned into samples when scraped: every request records
    here, and the client's instruments take a lock per counter and per bucket on each call
    (results/bench.md, speed tricks: "request metrics kept as plain numbers")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int, str], list[float]] = {}
        """(route, status, scenario) -> [count, created]."""
        self._times: dict[str, list[float]] = {}
        """route -> each bucket's own count (not cumulative), then the sum, then created."""

    def record(self, route: str, status: int, scenario: str, seconds: float) -> None:
        """One request answered, in `seconds`."""
        key = (route, status, scenario)
        with self._lock:
            count = self._counts.get(key)
            if count is None:
                count = self._counts[key] = [0.0, time.time()]
            count[0] += 1.0
            times = self._times.get(route)
            if times is None:
                times = self._times[route] = [0.0] * len(_BOUNDS) + [0.0, time.time()]
            times[bisect_left(_BOUNDS, seconds)] += 1.0
            times[-2] += seconds

    def describe(self) -> list[Metric]:
        return [Metric(REQUESTS, REQUESTS_HELP, "counter"), Metric(SECONDS, SECONDS_HELP, "histogram")]

    def collect(self) -> list[Metric]:
        requests, seconds = self.describe()
        with self._lock:
            counts = [(key, list(value)) for key, value in self._counts.items()]
            times = [(route, list(value)) for route, value in self._times.items()]
        # PROMETHEUS_DISABLE_CREATED_SERIES, as the client reads it (a private name: kept if it moves)
        created = getattr(metrics_module, "_use_created", True)
        for (route, status, scenario), (count, made) in counts:
            labels = {"route": route, "status": str(status), "scenario": scenario}
            requests.add_sample(REQUESTS + "_total", labels, count)
            if created:
                requests.add_sample(REQUESTS + "_created", labels, made)
        for route, value in times:
            acc = 0.0
            for le, n in zip(_LE, value, strict=False):
                acc += n
                seconds.add_sample(SECONDS + "_bucket", {"route": route, "le": le}, acc)
            seconds.add_sample(SECONDS + "_count", {"route": route}, acc)
            seconds.add_sample(SECONDS + "_sum", {"route": route}, value[-2])
            if created:
                seconds.add_sample(SECONDS + "_created", {"route": route}, value[-1])
        return [requests, seconds]


_LANE = "/v1/chat/completions"
"""Answered past the router (`chat.ChatLane`), so no route is recorded in its scope."""


class CountRequests:
    """Middleware, outermost: each request's route, status, scenario and time, once it ended."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.record = metrics.requests.record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # None on the chat lane, whose getattr would raise (and catch) an AttributeError.
            route = scope.get("route")
            template = getattr(route, "path", None) if route is not None else None
            template = template or (_LANE if scope["path"] == _LANE else "unmatched")
            self.record(template, status[0], scope.get(SCENARIO, ""), time.perf_counter() - started)


def fault_injected(request: Request, kind: str) -> None:
    metrics: Metrics | None = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.faults.labels(kind).inc()


async def metrics_page(request: Request) -> Response:
    """GET /metrics: the Prometheus text format (open, like /healthz: it holds no request's content)."""
    metrics: Metrics = request.app.state.metrics
    journal = request.app.state.config.journal
    metrics.journal_entries.set(len(journal.entries()) if journal is not None else 0)
    metrics.journal_bytes.set(journal.kept_bytes if journal is not None else 0)
    encoder, media_type = choose_encoder(request.headers.get("accept", ""))  # text, or OpenMetrics if asked
    return Response(encoder(metrics.registry), headers={"content-type": media_type})


async def readyz(request: Request) -> Response:
    """GET /readyz: 200 once the server answers scripted requests (scenarios loaded, encoder
    ready: `create_app` does both before it returns), with how many scenarios it serves."""
    return JSONResponse({"status": "ready", "scenarios": len(request.app.state.config.scenarios)})
