"""Servers as their own processes: the mock for `make experiments`, any server polled for health."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import httpx

from experiments.lab.paths import ROOT


def _written(out: BinaryIO) -> bytes:
    """What the server wrote to `out` so far, read at an offset: the server's output shares the
    file position with `out`, and seeking it back would make the server write over its own log."""
    return os.pread(out.fileno(), os.fstat(out.fileno()).st_size, 0)


@contextmanager
def _started(
    argv: list[str], *, health: Callable[[bytes], str | None], name: str, log: Path | None, timeout_s: float
) -> Iterator[tuple[subprocess.Popen, str]]:
    """Run a server as its own process until the URL `health(its output so far)` names (None:
    not yet known) answers 200; yield it and that URL; stop it on exit.

    Its output goes to `log` (default: a temporary file), whose tail is quoted if it dies early.
    """
    with open(log, "w+b") if log else tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    tail = _written(out).decode(errors="replace")[-2000:]
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")
                url = health(_written(out))
                try:
                    if url is not None and httpx.get(url, timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    waited = f"answer {url}" if url else "say which port it listens on"
                    raise RuntimeError(f"{name} did not {waited} within {timeout_s:.0f} s")
                time.sleep(0.05)
            yield proc, url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def server_process(
    argv: list[str], *, health_url: str, name: str, log: Path | None = None, timeout_s: float = 30.0
) -> Iterator[subprocess.Popen]:
    """Run a server as its own process until `health_url` answers 200; stop it on exit."""
    with _started(argv, health=lambda _: health_url, name=name, log=log, timeout_s=timeout_s) as (proc, _):
        yield proc


_LISTENING = re.compile(rb"Uvicorn running on (http://[^\s]+) \(Press CTRL\+C")


def listening_origin(output: bytes) -> str | None:
    """The origin in the line uvicorn logs once it listens (for --port 0, the port it was given),
    None before that line is whole: a port read while the line is still being written would be
    cut short."""
    found = _LISTENING.search(output)
    return None if found is None else found[1].decode()


@contextmanager
def uvicorn_process(
    argv: list[str], *, name: str, health_path: str = "/healthz", log: Path | None = None,
    timeout_s: float = 30.0,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run `argv`, a uvicorn server told to listen on port 0, as its own process until
    `health_path` answers 200; yield its origin (`http://host:port`) and the process.

    The kernel picks the port as the server binds it, and the server's own log names it: no
    other process can take it in between, as one can a port picked free beforehand.
    """

    def health(output: bytes) -> str | None:
        origin = listening_origin(output)
        return None if origin is None else origin + health_path

    with _started(argv, health=health, name=name, log=log, timeout_s=timeout_s) as (proc, url):
        yield url.removesuffix(health_path), proc


@contextmanager
def mock_server(*options: str, host: str = "127.0.0.1") -> Iterator[tuple[str, subprocess.Popen]]:
    """Run `python -m mockprovider --quiet <options>` as its own process on a loopback port the
    kernel picks; yield its `/v1` URL and the process (for its pid)."""
    argv = [sys.executable, "-m", "mockprovider", "--host", host, "--port", "0", "--quiet", *options]
    name = f"the mock ({' '.join(options) or 'default options'})"
    with uvicorn_process(argv, name=name) as (origin, proc):
        yield f"{origin}/v1", proc


@contextmanager
def mock_process(*, host: str = "127.0.0.1", workers: int = 1) -> Iterator[str]:
    """Run `python -m mockprovider` as its own process(es) and yield its `/v1` URL."""
    with mock_server("--workers", str(workers), host=host) as (url, _):
        yield url
