"""httpx's own transport, with a request's head and body leaving in one write.

httpcore writes a request's header block and its body as two socket sends. On a loopback
provider each send wakes the server (its event loop reads, parses, waits for the rest): two
wake-ups, two system calls on each side, per turn. `one_write(client)` gives the client's
connection pools (its default one and any proxy's) a network backend whose streams hold a
header block back until the next write, and send both as one; anything else — a read, TLS,
a close — sends what is held first. Bytes and their order on the wire are unchanged.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any

import httpcore
import httpx

# What a first connection imports lazily (httpcore's default backend, anyio's asyncio one), loaded
# with the harness instead of on a run's first request; only slower if they moved.
for _lazy in ("httpcore._backends.anyio", "anyio._backends._asyncio"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_lazy)


class _Stream(httpcore.AsyncNetworkStream):
    """A stream that sends a header block with what follows it (httpcore's interface: each
    method takes its own `timeout`)."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._held = b""

    async def _flush(self, timeout: float | None) -> None:  # noqa: ASYNC109
        if self._held:
            held, self._held = self._held, b""
            await self._inner.write(held, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not self._held and buffer.endswith(b"\r\n\r\n"):  # a header block: its body follows
            self._held = buffer
            return
        buffer, self._held = self._held + buffer, b""
        if buffer:
            await self._inner.write(buffer, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        await self._flush(timeout)
        return await self._inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held = b""
        await self._inner.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:  # noqa: ASYNC109
        await self._flush(timeout)
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def one_write(client: httpx.AsyncClient) -> int:
    """Wrap the network backend of each httpcore pool `client` built; returns how many were.
    A pool laid out otherwise (another httpx or httpcore) is left as it is: only slower."""
    wrapped = 0
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, httpcore.AsyncNetworkBackend) and not isinstance(backend, _Backend):
            pool._network_backend = _Backend(backend)
            wrapped += 1
    return wrapped
