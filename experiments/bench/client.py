"""A lean load client: `python experiments/bench/client.py HOST PORT BODYFILE CONNECTIONS SECONDS`.

One asyncio process, raw keep-alive HTTP/1.1 on CONNECTIONS sockets, each posting the same body
back to back (no httpx, so the client is not the bottleneck). It warms up for half a second,
counts answers for SECONDS, and prints one JSON line: requests, errors, seconds and the CPU
seconds it used itself, so a reader can tell the server's limit from the client's. Standard
library only, and run by path, so starting it costs no imports of this lab.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

WARMUP_S = 0.5


async def _connection(host: str, port: int, request: bytes, until: float, tally: dict[str, int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    loop = asyncio.get_running_loop()
    try:
        while (now := loop.time()) < until:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
            await reader.readexactly(length)
            tally["all"] += 1
            if now >= tally["from"]:
                tally["ok" if head[9:12] == b"200" else "errors"] += 1
    finally:
        writer.close()


async def _client(host: str, port: int, body: bytes, connections: int, seconds: float) -> dict[str, float]:
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    start = loop.time()
    tally = {"ok": 0, "errors": 0, "all": 0, "from": start + WARMUP_S}
    cpu = time.process_time()
    await asyncio.gather(
        *(_connection(host, port, request, start + WARMUP_S + seconds, tally) for _ in range(connections))
    )
    used = time.process_time() - cpu
    elapsed = loop.time() - start
    return {
        "requests": tally["ok"],
        "all_requests": tally["all"],  # the warm-up's too
        "errors": tally["errors"],
        "seconds": seconds,
        # The warm-up's share of CPU taken out pro rata.
        "client_cpu_s": used * seconds / elapsed,
    }


def main(argv: list[str]) -> None:
    host, port, body, connections, seconds = argv
    result = asyncio.run(_client(host, int(port), Path(body).read_bytes(), int(connections), float(seconds)))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
