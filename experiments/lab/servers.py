"""Servers as their own processes: the mock for `make experiments`, any server polled for health."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from experiments.lab.paths import ROOT
from mockprovider.server import free_port


@contextmanager
def server_process(
    argv: list[str], *, health_url: str, name: str, log: Path | None = None, timeout_s: float = 30.0
) -> Iterator[subprocess.Popen]:
    """Run a server as its own process until `health_url` answers 200; stop it on exit.

    Its output goes to `log` (default: a temporary file), whose tail is quoted if it dies early.
    """
    with open(log, "w+b") if log else tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    out.seek(0)
                    tail = out.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")
                try:
                    if httpx.get(health_url, timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not answer {health_url} within {timeout_s:.0f} s")
                time.sleep(0.05)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def mock_server(*options: str, host: str = "127.0.0.1") -> Iterator[tuple[str, subprocess.Popen]]:
    """Run `python -m mockprovider --quiet <options>` as its own process on a free loopback port;
    yield its `/v1` URL and the process (for its pid)."""
    port = free_port(host)
    argv = [sys.executable, "-m", "mockprovider", "--host", host, "--port", str(port), "--quiet", *options]
    health = f"http://{host}:{port}/healthz"
    name = f"the mock ({' '.join(options) or 'default options'})"
    with server_process(argv, health_url=health, name=name) as proc:
        yield f"http://{host}:{port}/v1", proc


@contextmanager
def mock_process(*, host: str = "127.0.0.1", workers: int = 1) -> Iterator[str]:
    """Run `python -m mockprovider` as its own process(es) and yield its `/v1` URL."""
    with mock_server("--workers", str(workers), host=host) as (url, _):
        yield url
