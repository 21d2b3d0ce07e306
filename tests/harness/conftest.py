"""Factories for harness tests: a sandbox per test, a request-counting transport, a driver."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness import ModelClient, RunOptions, RunState, make_sandbox, new_run, run
from harness.catalog import default_tools

TASK = "Which file mentions a timeout?"


class CountingTransport(httpx.AsyncBaseTransport):
    """Real loopback HTTP, remembering every request body the harness sent."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.bodies: list[dict[str, Any]] = []
        self.attempt_headers: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        self.attempt_headers.append(request.headers.get("x-lab-attempt", ""))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def counting() -> type[CountingTransport]:
    """The class itself, so a test can make a fresh transport per run."""
    return CountingTransport


@pytest.fixture
def task() -> str:
    return TASK


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    return make_sandbox(tmp_path / "sandbox")


Drive = Callable[..., RunState]


@pytest.fixture
def drive(mock_url: str, sandbox: Path) -> Drive:
    """`drive(model, state=None, tools=None, transport=None, **options)` runs to a stop, synchronously."""

    def go(
        model: str,
        *,
        state: RunState | None = None,
        tools: list | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        base_url: str | None = None,
        **options: Any,
    ) -> RunState:
        state = state or new_run(TASK)
        options.setdefault("sandbox", sandbox)
        opts = RunOptions(model=model, **options)

        async def main() -> RunState:
            async with ModelClient(base_url or mock_url, transport=transport, backoff_s=0.01) as client:
                return await run(state, tools=tools or default_tools(scan_seconds=0.3), options=opts,
                                 client=client)

        return asyncio.run(main())

    return go
