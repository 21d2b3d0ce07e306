"""One cancellation signal for a whole run: the HTTP call, every tool, every sub-agent.

`Cancel` wraps an `asyncio.Event` with the reason it was set. The loop races the model call
against it, hands it to each tool in `ToolContext.cancel`, and a sub-agent reuses the same
object, so one Stop cancels the tree.
"""

from __future__ import annotations

import asyncio


class Cancelled(Exception):
    """Raised by a tool or the model client when the run's `Cancel` was set."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Cancel:
    """A settable, awaitable stop signal carrying a reason (like an AbortSignal)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reason: str | None = None

    def set(self, reason: str = "cancelled") -> None:
        """Cancel with `reason` (the first reason wins). Safe to call from any thread."""
        if self.reason is None:
            self.reason = reason
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if self._loop is not None and here is not self._loop and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)
        else:
            self._event.set()

    def is_set(self) -> bool:
        return self.reason is not None

    async def wait(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._event.wait()

    def raise_if_set(self) -> None:
        if self.is_set():
            raise Cancelled(self.reason or "cancelled")

    async def sleep(self, seconds: float) -> None:
        """Sleep, but raise `Cancelled` the moment the signal is set."""
        try:
            await asyncio.wait_for(self.wait(), timeout=seconds)
        except TimeoutError:
            return
        raise Cancelled(self.reason or "cancelled")
