"""Run an ASGI app under uvicorn on a loopback port, in a background thread.

Tests and experiments use this to talk to the mock through a real socket.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from mockprovider.protocol import http_protocol


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class PromptServer(uvicorn.Server):
    """A uvicorn server that stops as soon as it is asked.

    uvicorn polls `should_exit` every 100 ms and its shutdown sleeps 100 ms, then polls the open
    connections every 100 ms: a process that starts and stops many servers (a test suite, an
    experiment) would spend most of its time waiting. Here `stop()` wakes the main loop at once,
    and shutdown waits for in-flight responses in short steps, still bounded by
    `timeout_graceful_shutdown`.
    """

    POLL_S = 0.002
    """How often shutdown looks whether the last connection has closed."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def stop(self) -> None:
        """Ask the server to exit; safe from any thread."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has already closed: the server is gone
                pass

    async def main_loop(self) -> None:
        if self.config.limit_max_requests is not None:
            return await super().main_loop()  # that limit needs uvicorn's per-tick check
        self._wake, self._loop = asyncio.Event(), asyncio.get_running_loop()
        # on_tick(0) refreshes the Date header; once a second is all it needs.
        while not await self.on_tick(0):
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)
            except TimeoutError:
                pass

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        # Idle keep-alive connections close now; busy ones close after their response.
        for connection in list(self.server_state.connections):
            connection.shutdown()
        # None waits without limit, as in uvicorn; 0 cancels at once.
        graceful = self.config.timeout_graceful_shutdown
        deadline = time.monotonic() + (float("inf") if graceful is None else graceful)
        state = self.server_state
        # uvicorn signals no event when a connection closes, so shutdown looks in short steps.
        while (state.connections or state.tasks) and time.monotonic() < deadline and not self.force_exit:  # noqa: ASYNC110
            await asyncio.sleep(self.POLL_S)
        for task in state.tasks:
            task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        for server in self.servers:
            # From Python 3.12 this waits for every connection, so it is bounded like the rest.
            left = None if graceful is None else max(deadline - time.monotonic(), 0.1)
            try:
                await asyncio.wait_for(server.wait_closed(), timeout=left)
            except TimeoutError:
                pass
        if not self.force_exit:
            await self.lifespan.shutdown()


@contextmanager
def serve_in_thread(
    app: ASGIApp | None = None, *, host: str = "127.0.0.1", uvicorn_options: dict[str, Any] | None = None,
    **app_options,
) -> Iterator[str]:
    """Serve `app` (default: a fresh mock built from `app_options`); yield its `/v1` base URL.
    `uvicorn_options` go to `uvicorn.Config` as they are."""
    if app is None:
        from mockprovider.app import create_app

        app = create_app(**app_options)
    # Binding our own socket avoids the race between picking a free port and uvicorn binding it.
    # proto must be IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say
    # so, and without it every response waits for Nagle and delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1,
            **{"http": http_protocol(), **(uvicorn_options or {})},
        )
        server = PromptServer(config)
        thread = threading.Thread(target=_run, args=(server, sock), daemon=True)
    except BaseException:
        sock.close()
        raise
    thread.start()
    deadline = time.monotonic() + 10
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.002)
        yield f"http://{host}:{port}/v1"
    finally:
        # Also when the server never started: a slow start must not go on serving unowned.
        server.stop()
        thread.join(timeout=5)
        sock.close()


def _run(server: PromptServer, sock: socket.socket) -> None:
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn exits when the app cannot load; serve_in_thread raises instead
        pass
