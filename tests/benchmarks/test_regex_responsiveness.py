"""`/healthz` latency while clients send tool results crafted against a scenario's regexes.

Each pattern below takes a backtracking engine exponential time on its text (the first froze the
server for seconds per request when conditions ran on Python's `re`), and the last is near the
largest program a scenario file may hold, searched over the longest text a condition reads. The
probe asks `/healthz` every 10 ms from its own thread; the figure is its p99 (target <= 100 ms).
`make test` runs a short version as a smoke test.
"""

from __future__ import annotations

import statistics
import threading

import httpx
from healthz_support import healthz_under_load

from mockprovider.app import create_app
from mockprovider.scripts.conditions import MAX_MATCH_CHARS
from mockprovider.server import serve_in_thread

CRAFTED = [
    (r"^(?:\w+\s?){1,8}$", "a" * 42 + "!"),
    (r"(?:a*){16}x", "a" * 61),
    (r"(a|aa)*b", "a" * 61),
    (r"(\w+\s?){1,90}\d", ("ab " * MAX_MATCH_CHARS)[:MAX_MATCH_CHARS]),
]
CLIENTS = 4


def _scripts() -> list[dict]:
    return [{"name": f"crafted{i}", "after_last": "repeat", "turns": [[
        {"if": {"tool_result_matches": pattern}, "content": "matched"}, {"content": "no match"}]]}
        for i, (pattern, _) in enumerate(CRAFTED)]


def _body(index: int) -> dict:
    text = CRAFTED[index % len(CRAFTED)][1]
    return {"model": f"crafted{index % len(CRAFTED)}", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t", "content": text}]}


def _load(url: str, stop: threading.Event, sent: list[int], index: int) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        n = index
        while not stop.is_set():
            response = client.post("/chat/completions", json=_body(n))
            assert response.json()["choices"][0]["message"]["content"] == "no match", response.text[:300]
            sent.append(1)
            n += 1


def measure(seconds: float) -> tuple[list[float], int]:
    """/healthz latencies (s) while the crafted load runs for `seconds`, and the requests answered."""
    with serve_in_thread(create_app(scenario_files=_scripts())) as url:
        return healthz_under_load(url, _load, CLIENTS, seconds)


def test_healthz_p99_while_tool_results_crafted_against_the_regexes_arrive(benchmark):
    seconds = 2.0 if benchmark.disabled else 8.0
    latencies, answered = benchmark.pedantic(measure, args=(seconds,), rounds=1, iterations=1)
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    key = "/healthz p99 under crafted regex tool results, ms (target <= 100)"
    benchmark.extra_info[key] = round(p99 * 1000, 1)
    benchmark.extra_info["/healthz max under that load, ms"] = round(max(latencies) * 1000, 1)
    benchmark.extra_info["crafted requests answered during that load"] = answered
    assert answered >= len(CRAFTED) and len(latencies) >= 10
