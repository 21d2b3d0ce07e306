"""The mock's memory stays bounded over 10,000 distinct ~1 MB prompts, full size.

`python -m mockprovider` runs as its own process; a client in this process sends it 10,000
distinct ~1 MB prompts (10 GB) over a few keep-alive loopback connections, and the server
process's resident memory is read from `/proc/<pid>/status`: VmRSS after a warm-up (the
baseline), and VmHWM (its peak, reset after the warm-up) once all have been answered.

Why the cap is what it is. What the mock keeps across requests is bounded in two places:
- its transcript memory (mockprovider/reading/memo.py) holds at most `max_bytes` (128 MB) of its own
  estimate, 5x a transcript's JSON text; a 1 MB prompt really holds ~2 MB (its text and its
  parsed content), so the estimate bounds it from above and ~26 such entries fit;
- o200k's count caches keep only texts of at most 4,096 characters, so a 1 MB content never
  enters them (here they gain one entry, the role "user").
Beyond that, each request in flight holds its working set until it is answered: the raw
body, its decoded text, the parsed content, the slice the memory would keep, and the
encoder's token list (~205,000 Python ints, ~8 MB): about 16 MB, and at most CONNECTIONS
requests are in flight. So the peak may grow by the memory's budget, plus that per
connection, plus 32 MB of room for the allocator. A memory that kept every prompt would
pass the cap after ~100 of them; the soak stops within 50 prompts of RSS crossing it.

So that the test cannot pass vacuously, every prompt must be answered 200 and a sample of
them must report exactly the `prompt_tokens` that `o200k.prompt_tokens` gives for its
messages (the server really read and counted each megabyte). Each prompt differs from the
others in its first characters, so the transcript memory (keyed on the first 2,048 * 2**k
characters) files every one under its own key and evicts to stay in budget.

o200k encodes this text (English, ~4.9 characters a token) at ~20 MB/s per core, and the mock
counts large texts on two worker threads (the encoder releases the GIL), so three connections
keep both cores busy: some 10 GB of encoding makes this a soak of minutes (8 of them measured
with another process busy on one of the two cores; `server CPU ms per prompt` in the figures
says what it costs whatever the machine is doing). So it runs only under `make bench`; with
benchmarks disabled, as in `make test`, it is skipped, and tests/mockprovider/reading/test_memory.py is
the quick in-process version.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import pytest

import o200k
from experiments.lab.servers import mock_server
from mockprovider.reading import memo

PROMPTS = 10_000
CONNECTIONS = 3
WARMUP = 2 * CONNECTIONS
"""Prompts sent before the baseline, so threads, arenas and the encoder are in place."""
SAMPLE_EVERY = 250
"""Every this many prompts, one is counted again here and compared with the server's count."""
MB = 1 << 20
IN_FLIGHT = 16 * MB
"""The working set of one request in flight (see the module docstring)."""
RSS_GROWTH_CAP = memo.MEMORY.max_bytes + CONNECTIONS * IN_FLIGHT + 32 * MB

FILLER = "the quick brown fox jumps over the lazy dog " * 22_700  # 998,800 characters
_HEAD, _TAIL = json.dumps(
    {"model": "plan", "messages": [{"role": "user", "content": f"prompt #####: {FILLER}"}]},
    separators=(",", ":"),
).encode().split(b"#####")


def body(n: int) -> bytes:
    """Prompt `n`'s request body, built when it is sent (all of them would be 10 GB)."""
    return b"%s%05d%s" % (_HEAD, n, _TAIL)


@dataclass(frozen=True, kw_only=True)
class Proc:
    rss: int
    """VmRSS, bytes."""
    peak: int
    """VmHWM, bytes: the largest VmRSS since the process started or `reset_peak`."""
    cpu_s: float
    """User and system CPU seconds, all threads."""


def proc(pid: int) -> Proc:
    """What /proc says of process `pid` now."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    status = {k: v.split() for k, v in (line.split(":", 1) for line in lines)}
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu_s = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return Proc(rss=int(status["VmRSS"][0]) * 1024, peak=int(status["VmHWM"][0]) * 1024, cpu_s=cpu_s)


def reset_peak(pid: int) -> None:
    """VmHWM := VmRSS (Linux's clear_refs, allowed on one's own processes)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@dataclass(frozen=True, kw_only=True)
class Soak:
    prompts: int
    connections: int
    seconds: float
    """Wall time of the prompts after the warm-up."""
    server_cpu_s: float
    """The server's CPU time over the same prompts: it moves far less than the wall time with
    the machine's other load, and on an idle machine the wall time is about half of it (two cores)."""
    baseline_rss: int
    peak_rss: int
    """VmHWM over the soak (reset after the warm-up)."""
    final_rss: int
    rss_after_tenth: int
    """VmRSS once a tenth of the prompts are answered: the transcript memory is full by then,
    so from here to `final_rss` is any creep a leak would add."""
    statuses: dict[int, int]
    prompt_tokens: dict[int, int]
    """The server's `usage.prompt_tokens`, by prompt number."""

    def figures(self) -> dict[str, float | int]:
        return {
            "prompts": self.prompts,
            "connections": self.connections,
            "seconds": round(self.seconds, 1),
            "MB/s sent": round(self.prompts * len(body(0)) / self.seconds / 1e6, 1),
            "server CPU ms per prompt": round(self.server_cpu_s / self.prompts * 1e3, 1),
            "baseline RSS, MB": round(self.baseline_rss / MB, 1),
            "peak RSS, MB": round(self.peak_rss / MB, 1),
            "growth, MB": round((self.peak_rss - self.baseline_rss) / MB, 1),
            "cap on growth, MB": round(RSS_GROWTH_CAP / MB, 1),
            f"RSS after {self.prompts // 10:,} prompts, MB": round(self.rss_after_tenth / MB, 1),
            "final RSS, MB": round(self.final_rss / MB, 1),
        }


@dataclass(kw_only=True)
class _Tally:
    """What the responses said, filled in as they arrive."""

    statuses: Counter[int] = field(default_factory=Counter)
    prompt_tokens: dict[int, int] = field(default_factory=dict)
    rss_after_tenth: int = 0


async def _send(client: httpx.AsyncClient, numbers: range, *, pid: int, baseline: int | None) -> _Tally:
    """Send prompts `numbers` over `CONNECTIONS` connections; past `baseline`, stop at once
    if the server's RSS grows by more than the cap (rather than swap the machine to death)."""
    tally, pending, tenth = _Tally(), iter(numbers), len(numbers) // 10

    async def connection() -> None:
        for n in pending:  # one shared iterator: each prompt is sent once, by whichever is free
            response = await client.post("/chat/completions", content=body(n))
            tally.statuses[response.status_code] += 1
            if response.status_code == 200:
                tally.prompt_tokens[n] = response.json()["usage"]["prompt_tokens"]
            done = tally.statuses.total()
            if baseline is not None and (done % 50 == 0 or done == tenth):
                rss = proc(pid).rss
                grew = (rss - baseline) / MB
                assert rss - baseline <= RSS_GROWTH_CAP, f"RSS grew {grew:.0f} MB by prompt {done}"
                tally.rss_after_tenth = rss if done == tenth else tally.rss_after_tenth

    async with asyncio.TaskGroup() as group:
        for _ in range(CONNECTIONS):
            group.create_task(connection())
    return tally


async def _soak(url: str, pid: int, prompts: int) -> Soak:
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, limits=limits, headers=headers, timeout=120) as client:
        warm = await _send(client, range(prompts, prompts + WARMUP), pid=pid, baseline=None)
        assert warm.statuses == {200: WARMUP}, warm.statuses
        reset_peak(pid)  # so the peak is the soak's
        start, started = proc(pid), time.perf_counter()
        tally = await _send(client, range(prompts), pid=pid, baseline=start.rss)
        seconds = time.perf_counter() - started
    end = proc(pid)
    return Soak(
        prompts=prompts, connections=CONNECTIONS, seconds=seconds, server_cpu_s=end.cpu_s - start.cpu_s,
        baseline_rss=start.rss, peak_rss=end.peak, final_rss=end.rss, rss_after_tenth=tally.rss_after_tenth,
        statuses=dict(tally.statuses), prompt_tokens=tally.prompt_tokens,
    )


def run_soak(prompts: int = PROMPTS) -> Soak:
    """Start `python -m mockprovider` on a free loopback port and soak it with `prompts` prompts."""
    with mock_server("--max-body-bytes", str(len(body(0)) + 1000)) as (url, server):
        return asyncio.run(_soak(url, server.pid, prompts))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
def test_rss_stays_bounded_over_10000_distinct_1mb_prompts(benchmark):
    if benchmark.disabled:
        pytest.skip("a soak of several minutes: runs under `make bench` (--benchmark-enable) only")
    soak = benchmark.pedantic(run_soak, rounds=1, iterations=1)
    benchmark.extra_info["memory soak"] = soak.figures()
    assert soak.statuses == {200: PROMPTS}, soak.statuses
    for n in [*range(0, PROMPTS, SAMPLE_EVERY), PROMPTS - 1]:
        messages = json.loads(body(n))["messages"]
        assert soak.prompt_tokens[n] == o200k.prompt_tokens(messages), f"prompt {n}"
    assert soak.peak_rss - soak.baseline_rss <= RSS_GROWTH_CAP, asdict(soak) | {"prompt_tokens": "…"}
