"""The mock beside any other OpenAI-compatible chat server, on the same request bodies.

    python -m experiments.bench.against --url http://127.0.0.1:4010/v1            # turns 1 and 100
    python -m experiments.bench.against --url URL --turns 1 20 100 --samples 400

Each sample posts one body of `experiments.bench.floor` (conversation k of `runaway` at turn t,
offering `list_files`, whose turn t - 1 was sent first) to both servers, one after the other in
alternating order, over one keep-alive `httpx.Client` each, so a busy moment of a shared machine
slows both sides of a sample alike. Both servers receive exactly the same bytes, `model` included:
the other server must answer `POST {url}/chat/completions` for model `runaway` with a 200 and a
`chat.completion` (a fixture that answers any request offering `list_files` with a call to it
does; docs/benchmarks.md shows one for aimock).

Our mock runs as its own process (`python -m mockprovider --quiet`), as the other server does,
unless `--mock-url` names one already running. The figures: each side's median (p50) wall time
per request, client included, the ratio of the two medians, and the median of the per-sample
ratios; and the machine's load average, since both sides share its cores with everything else.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import httpx

from experiments.bench.floor import HEADERS, TASK, request_body, timed
from experiments.lab.servers import mock_server


@dataclass(frozen=True, kw_only=True)
class Against:
    turn: int
    samples: int
    mock_us: float
    """Median wall time of one request to the mock, client included."""
    other_us: float
    """The same for the other server."""
    ratio: float
    """mock_us / other_us: the ratio of the two p50s."""
    paired: float
    """Median of the per-sample ratios mock / other."""


def _answered(response: httpx.Response) -> None:
    """A 200 carrying a chat completion, else the reason the comparison cannot go on."""
    url = response.request.url
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:300]}")
    try:
        choices = response.json().get("choices")
    except ValueError:
        choices = None
    if not choices:
        raise RuntimeError(f"{url} answered 200 without a chat completion: {response.text[:300]}")


def compare(mock: httpx.Client, other: httpx.Client, turn: int, *, samples: int) -> Against:
    """Interleaved per-request times of `samples` conversations at `turn` (see the module doc)."""
    tasks = [f"{TASK} (run {k} of a {samples}-run suite)" for k in range(samples)]
    bodies = [request_body(turn, task=task) for task in tasks]
    for client in (mock, other):  # each conversation's previous turn, the connection warmed
        for task in tasks:
            _answered(client.post("/chat/completions", content=request_body(turn - 1, task=task)))
    clients = (mock, other)
    rows = []
    for k, body in enumerate(bodies):
        walls = {}
        for j in (k % 2, (k + 1) % 2):  # each server goes first every other sample
            walls[j] = timed(clients[j], body, check=_answered)[0]
        rows.append((walls[0], walls[1]))
    mock_s = statistics.median(m for m, _ in rows)
    other_s = statistics.median(o for _, o in rows)
    return Against(turn=turn, samples=samples, mock_us=mock_s * 1e6, other_us=other_s * 1e6,
                   ratio=mock_s / other_s, paired=statistics.median(m / o for m, o in rows))


@contextmanager
def clients(url: str, mock_url: str | None = None) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """One keep-alive client for our mock (its own process unless `mock_url` is given) and one for `url`."""
    with ExitStack() as stack:
        if mock_url is None:
            mock_url, _ = stack.enter_context(mock_server())
        mock = stack.enter_context(httpx.Client(base_url=mock_url, headers=HEADERS))
        other = stack.enter_context(httpx.Client(base_url=url, headers=HEADERS))
        yield mock, other


def line(result: Against) -> str:
    return (f"turn {result.turn}: p50 mock {result.mock_us:,.0f} us, other {result.other_us:,.0f} us; "
            f"mock / other {result.ratio:.3f}x (median of paired ratios {result.paired:.3f}x, "
            f"{result.samples} samples)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the other server's base URL, ending in /v1")
    parser.add_argument("--mock-url", help="our mock's base URL, if already running (default: start one)")
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--samples", type=int, default=200, help="conversations per turn")
    args = parser.parse_args(argv)
    if min(args.turns) < 1 or args.samples < 1:
        parser.error("--turns and --samples must be at least 1")
    with clients(args.url, args.mock_url) as (mock, other):
        for turn in args.turns:
            print(line(compare(mock, other, turn, samples=args.samples)), flush=True)
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)


if __name__ == "__main__":
    main()
