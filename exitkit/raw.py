"""The floor every overhead figure is divided by: a bare `httpx` loop sending the same bodies.

It replays, one after another, the request bodies an agent sent (read from the journal), so
the only work left is what no agent can avoid: encode, send over loopback, read the reply.
"""

from __future__ import annotations

from typing import Any

import httpx


async def replay(base_url: str, bodies: list[dict[str, Any]], *, api_key: str = "exitkit-unused") -> int:
    """Send each body to `/chat/completions`; returns how many got a 200."""
    ok = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=60,
                                 headers={"authorization": f"Bearer {api_key}"}) as client:
        for body in bodies:
            reply = await client.post("/chat/completions", json=body)
            await reply.aread()
            ok += reply.status_code == 200
    return ok
