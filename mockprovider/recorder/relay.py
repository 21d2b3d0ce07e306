"""An upstream reply's bytes as the proxy relays them: read whole up to a limit, or streamed on
from what was read; the reply and its client closed together."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


async def read_up_to(
    chunks: AsyncIterator[bytes], response: httpx.Response, limit: int
) -> tuple[bytes, bool]:
    """The reply's bytes, whole (True) or the first ones past `limit` (False)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return b"", False
    parts, size = [], 0
    async for chunk in chunks:
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(parts), False
    return b"".join(parts), True


async def rest(head: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if head:
        yield head
    async for chunk in chunks:
        yield chunk


async def close_both(response: httpx.Response, client: httpx.AsyncClient) -> None:
    await response.aclose()
    await client.aclose()
