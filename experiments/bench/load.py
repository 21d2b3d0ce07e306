"""Throughput of the mock under a bounded load, with the client in its own process.

The client is `bench_client.py` (see there). `measure()` starts `python -m mockprovider`
(with `--workers`, `--loop`, `--http`) and runs that client against it. Every body is resent
as is, which the mock answers from its transcript memory like a retry (mockprovider/reading/memo.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from experiments.bench.floor import request_body
from experiments.lab.servers import mock_server

CLIENT = Path(__file__).with_name("client.py")
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
    server_cpu_us: float | None
    """Server CPU (all its processes) per answered request, warm-up included; None
    where /proc is not there to read it. Unlike requests/s it barely moves on a busy machine."""


def _cpu_s(pid: int) -> float:
    """CPU seconds used so far by process `pid` and its children (uvicorn's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick + sum(_cpu_s(int(c)) for c in children)


def _stack(loop: str, http: str) -> str:
    """The stack the mock runs for these options (auto: uvloop when installed; the mock's own
    protocol, `Http11`, on httptools)."""
    found = importlib.util.find_spec("uvloop") is not None
    loop = loop if loop != "auto" else ("uvloop" if found else "asyncio")
    return f"{loop}+{'Http11' if http == 'auto' else http}"


def measure(
    *, workers: int, turn: int, connections: int, seconds: float, loop: str = "auto", http: str = "auto"
) -> Throughput:
    """Requests per second of one mock (`workers` processes) under the client above."""
    with (
        tempfile.NamedTemporaryFile(suffix=".json") as body,
        mock_server("--workers", str(workers), "--loop", loop, "--http", http) as (url, server),
    ):
        Path(body.name).write_bytes(request_body(turn))
        address = httpx.URL(url)
        client = [sys.executable, str(CLIENT), address.host, str(address.port), body.name]
        client += [str(connections), str(seconds)]
        linux = sys.platform.startswith("linux")
        cpu = _cpu_s(server.pid) if linux else 0.0
        out = json.loads(subprocess.run(client, check=True, capture_output=True, text=True).stdout)
        cpu = _cpu_s(server.pid) - cpu if linux else None
    return Throughput(
        workers=workers,
        turn=turn,
        connections=connections,
        server=_stack(loop, http),
        requests_per_s=out["requests"] / out["seconds"],
        errors=out["errors"],
        client_cpu_share=out["client_cpu_s"] / out["seconds"],
        server_cpu_us=cpu / out["all_requests"] * 1e6 if cpu is not None and out["all_requests"] else None,
    )
