"""One cancellation signal for a whole run: the HTTP call, every tool, every sub-agent.

`Cancel` wraps an `asyncio.Event` with the reason it was set. The loop races the model call
against it, hands it to each tool in `ToolContext.cancel`, and a sub-agent reuses the same
object, so one Stop cancels the tree.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator


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
        self._callbacks: list[Callable[[], object]] = []
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
            self._loop.call_soon_threadsafe(self._fire)
        else:
            self._fire()

    def _fire(self) -> None:
        self._event.set()
        for callback in list(self._callbacks):
            callback()

    def is_set(self) -> bool:
        return self.reason is not None

    async def wait(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self._event.wait()

    @contextlib.contextmanager
    def cancels_this_task(self) -> Iterator[None]:
        """Inside the block, the signal cancels the running task and the block raises
        `Cancelled`; a cancellation from elsewhere passes through as it came (as
        `asyncio.timeout` does, with no second task to race against)."""
        self.raise_if_set()
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "cancels_this_task needs a running task"
        fired = False

        def cancel() -> None:
            nonlocal fired
            if not fired:
                fired = True
                task.cancel()

        self._callbacks.append(cancel)
        try:
            yield
        except asyncio.CancelledError:
            if fired and task.uncancel() == 0:
                raise Cancelled(self.reason or "cancelled") from None
            raise
        finally:
            self._callbacks.remove(cancel)

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
