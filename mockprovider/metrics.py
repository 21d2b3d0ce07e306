"""What an operator of a shared mock watches: `GET /metrics` in Prometheus's text format, and
`GET /readyz`.

Counted per server process, in the process's own registry (behind `--workers N` each worker
counts its own, as its journal does): requests by route (the route's template, never the raw
path, so model names in Gemini's URLs add no series), status and scenario (only names the mock
serves); the time to answer, as a histogram by route; faults injected, by kind; the journal's
size. Labels come from bounded sets only, so no client can grow the registry.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCENARIO = "mockprovider.scenario"
"""The scope key where `steps.resolve` leaves the scenario a request was answered by."""
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Seconds: from a bare loopback reply to the longest scripted wait (five minutes)."""


class Metrics:
    """One app's instruments, in a registry of its own (many apps share a test process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("mockprovider_requests", "Requests answered, by route, status and scenario.",
                                ("route", "status", "scenario"), registry=self.registry)
        self.seconds = Histogram("mockprovider_request_seconds", "Time from the request to the end of the "
                                 "response, by route.", ("route",), buckets=BUCKETS, registry=self.registry)
        self.faults = Counter("mockprovider_faults_injected", "Faults injected, by kind.", ("kind",),
                              registry=self.registry)
        self.journal_entries = Gauge("mockprovider_journal_entries", "Requests the journal holds.",
                                     registry=self.registry)
        self.journal_bytes = Gauge("mockprovider_journal_bytes", "Bytes the journal's entries count.",
                                   registry=self.registry)
        self._series: dict[tuple[str, int, str], tuple[Any, Any]] = {}

    def series(self, route: str, status: int, scenario: str) -> tuple[Any, Any]:
        """The request counter and the time histogram of one (route, status, scenario), looked up
        by labels once: `labels()` checks and joins its arguments under a lock on every call
        (results/bench.md, speed tricks: "metric series kept"). The labels come from bounded
        sets (see the module doc), so this dict is bounded too."""
        found = self._series.get((route, status, scenario))
        if found is None:
            found = (self.requests.labels(route, str(status), scenario), self.seconds.labels(route))
            self._series[(route, status, scenario)] = found
        return found


_LANE = "/v1/chat/completions"
"""Answered past the router (`chat.ChatLane`), so no route is recorded in its scope."""


class CountRequests:
    """Middleware, outermost: each request's route, status, scenario and time, once it ended."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

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
            counter, histogram = self.metrics.series(template, status[0], scope.get(SCENARIO, ""))
            counter.inc()
            histogram.observe(time.perf_counter() - started)


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
