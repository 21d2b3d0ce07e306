"""Throughput of the mock under a bounded load, with the client in its own process.

The client is `bench_client.py` (see there). `measure()` starts `python -m mockprovider`
(with `--workers`, `--loop`, `--http`) and runs that client against it. Every body is resent
as is, which the mock answers from its transcript memory like a retry (mockprovider/memo.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from experiments.bench_floor import request_body
from experiments.common import server_process
from mockprovider.server import free_port

CLIENT = Path(__file__).with_name("bench_client.py")
"""Run by path, so its process imports nothing but the standard library."""


@dataclass(frozen=True, kw_only=True)
class Throughput:
    workers: int
    turn: int
    connections: int
    server: str
    requests_per_s: float
    errors: int
    client_cpu_share: float
    """Cores the client itself used (1.0 = one core busy all the time)."""


def measure(
    *, workers: int, turn: int, connections: int, seconds: float, loop: str = "asyncio", http: str = "h11"
) -> Throughput:
    """Requests per second of one mock (`workers` processes) under the client above."""
    port = free_port()
    argv = [sys.executable, "-m", "mockprovider", "--port", str(port), "--quiet",
            "--workers", str(workers), "--loop", loop, "--http", http]
    with (
        tempfile.NamedTemporaryFile(suffix=".json") as body,
        server_process(argv, health_url=f"http://127.0.0.1:{port}/healthz", name="the mock"),
    ):
        Path(body.name).write_bytes(request_body(turn))
        client = [sys.executable, str(CLIENT), "127.0.0.1", str(port), body.name]
        client += [str(connections), str(seconds)]
        out = json.loads(subprocess.run(client, check=True, capture_output=True, text=True).stdout)
    return Throughput(
        workers=workers,
        turn=turn,
        connections=connections,
        server=f"{loop}+{http}",
        requests_per_s=out["requests"] / out["seconds"],
        errors=out["errors"],
        client_cpu_share=out["client_cpu_s"] / out["seconds"],
    )
