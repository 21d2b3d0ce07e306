"""Factories for harness tests: a sandbox per test, a request-counting transport, a driver."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness import ModelClient, OpenAIChat, Policy, RunState, new_run, run
from harness.chapter import SYSTEM, Knobs, Taught, chapter_tools, every_tool, make_sandbox

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

RUN_KWARGS = {"limits", "pricing", "cancel", "store", "trace", "on_progress", "checkpoint"}
POLICY_KWARGS = {"errors", "auto_approve", "max_tokens", "min_reply_tokens"}


@pytest.fixture
def drive(mock_url: str, sandbox: Path) -> Drive:
    """`drive(model, state=None, tools=None, transport=None, **settings)` runs to a stop, synchronously.

    `settings` are `run()`'s keywords, `Policy` fields, `dedupe` ("off", "read-only", or "all":
    the chapter's naive cache), the chapter's knobs `deaf_tools=True` and
    `feed_back_permanent=True`, and `mock_options` (sent as the mock's header).
    """

    def go(
        model: str,
        *,
        state: RunState | None = None,
        tools: list | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        base_url: str | None = None,
        dedupe: str = "off",
        deaf_tools: bool = False,
        feed_back_permanent: bool = False,
        mock_options: str | None = None,
        **settings: Any,
    ) -> RunState:
        state = state or new_run(TASK, system=SYSTEM)
        unknown = settings.keys() - RUN_KWARGS - POLICY_KWARGS
        assert not unknown, f"drive() does not know {unknown}"
        chosen_dedupe = every_tool if dedupe == "all" else dedupe == "read-only"
        policy = Policy(dedupe=chosen_dedupe, **{k: v for k, v in settings.items() if k in POLICY_KWARGS})
        knobs = Knobs(deaf_tools=deaf_tools, feed_back_permanent=feed_back_permanent)
        headers = {"x-mock-options": mock_options} if mock_options else None

        async def main() -> RunState:
            async with ModelClient(base_url or mock_url, transport=transport, backoff_s=0.01) as client:
                chat = OpenAIChat(model, client=client, headers=headers)
                research = chat.with_name("plan") if model == "research" else None
                chosen = tools
                if chosen is None:
                    chosen = chapter_tools(sandbox, scan_seconds=0.3, research=research)
                if knobs != Knobs():
                    chosen = [Taught(t, knobs) for t in chosen]
                return await run(state, model=chat, tools=chosen, policy=policy,
                                 **{k: v for k, v in settings.items() if k in RUN_KWARGS})

        return asyncio.run(main())

    return go
