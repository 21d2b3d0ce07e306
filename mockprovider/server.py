"""Run an ASGI app under uvicorn on a loopback port, in a background thread.

Tests and experiments use this to talk to the mock through a real socket.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def serve_in_thread(app: ASGIApp | None = None, *, host: str = "127.0.0.1", **app_options) -> Iterator[str]:
    """Serve `app` (default: a fresh mock built from `app_options`); yield its `/v1` base URL."""
    if app is None:
        from mockprovider.app import create_app

        app = create_app(**app_options)
    # Binding our own socket avoids the race between picking a free port and uvicorn binding it.
    # proto must be IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say
    # so, and without it every response waits for Nagle and delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.005)
    try:
        yield f"http://{host}:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()
