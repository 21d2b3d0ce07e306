"""The mock's per-request cost beside a floor: a bare Starlette endpoint that parses the same body.

Both servers run under uvicorn on loopback ports in this process and are timed by one
`httpx.Client` per server (one keep-alive connection each), request by request, interleaved:
each sample posts the same body to the mock and to the floor, in alternating order, so a
noisy neighbour slows both sides of a pair alike. The figure is the median of the per-pair
ratios.

The bodies are shaped like a real agent loop's: sample k is conversation k (its own task
text) at turn t, and the mock has already answered that conversation at turn t - 1, as it
would have in a real run. Each body is sent once, so the mock never sees the exact request
twice (a retry would be cheaper still: see `retry` below).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mockprovider.scenarios import SCENARIOS
from mockprovider.server import serve_in_thread
from mockprovider.transcript import conversation

LISTING = "errors.log (2140 bytes)\naccess.log (812 bytes)\nnotes.txt (29 bytes)\nprivate.key (64 bytes)"
TASK = "Which file mentions a timeout?"
HEADERS = {"content-type": "application/json"}


def runaway_messages(turns: int, *, task: str = TASK) -> list[dict[str, Any]]:
    """The messages a `runaway` client sends at turn index `turns`."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant with file tools."},
        {"role": "user", "content": task},
    ]
    for _ in range(turns):
        call = SCENARIOS["runaway"](conversation(messages)).tool_calls[0]
        function = {"name": call.name, "arguments": call.arguments}
        wire_call = {"id": call.id, "type": "function", "function": function}
        messages.append({"role": "assistant", "content": None, "tool_calls": [wire_call]})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": LISTING})
    return messages


TOOLS = [{"type": "function", "function": {
    "name": "list_files", "description": "List the files in the folder.",
    "parameters": {"type": "object", "properties": {}},
}}]
"""What an agent loop offers with every request: the mock, like a real model, calls only tools it
is offered (a body without them would measure the no-tools fallback, which no agent loop asks for)."""


def request_body(turns: int, *, task: str = TASK) -> bytes:
    return json.dumps({"model": "runaway", "messages": runaway_messages(turns, task=task),
                       "tools": TOOLS}).encode()


async def _bare_endpoint(request: Request) -> JSONResponse:
    body = json.loads(await request.body())
    return JSONResponse({"ok": True, "messages": len(body["messages"])})


def bare_app() -> Starlette:
    """The floor this stack allows: read and parse the same JSON body, answer small JSON."""
    return Starlette(routes=[Route("/v1/chat/completions", _bare_endpoint, methods=["POST"])])


@dataclass(frozen=True, kw_only=True)
class FloorComparison:
    turn: int
    samples: int
    mock_us: float
    """Median wall time of one request to the mock, client included."""
    floor_us: float
    ratio: float
    """Median of the per-pair wall-time ratios mock / floor."""
    cpu_ratio: float
    """The same over CPU time (client and server threads): robust to a busy machine."""


@contextmanager
def servers() -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """A fresh mock and a floor on loopback ports, with one keep-alive client each."""
    with ExitStack() as stack:
        mock_url = stack.enter_context(serve_in_thread())
        floor_url = stack.enter_context(serve_in_thread(bare_app()))
        mock = stack.enter_context(httpx.Client(base_url=mock_url, headers=HEADERS))
        floor = stack.enter_context(httpx.Client(base_url=floor_url, headers=HEADERS))
        yield mock, floor


def _timed(client: httpx.Client, body: bytes) -> tuple[float, float]:
    """Wall and process CPU seconds of one request."""
    wall, cpu = time.perf_counter(), time.process_time()
    response = client.post("/chat/completions", content=body)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if response.status_code != 200:
        raise RuntimeError(f"{client.base_url} answered {response.status_code}: {response.text[:300]}")
    return wall, cpu


def compare(
    mock: httpx.Client, floor: httpx.Client, turn: int, *, samples: int, retry: bool = False
) -> FloorComparison:
    """Interleaved per-request times of `samples` conversations at `turn` (see the module doc).

    With `retry`, every body is sent to the mock once beforehand: the measured request is
    then a resend of one the mock has answered, as a client's retry is.
    """
    tasks = [f"{TASK} (run {k} of a {samples}-run suite)" for k in range(samples)]
    bodies = [request_body(turn, task=task) for task in tasks]
    warm = bodies if retry else [request_body(turn - 1, task=task) for task in tasks]
    for body in warm[:8]:  # the connection and the caches of the floor's stack
        _timed(floor, body)
    for body in warm:
        _timed(mock, body)
    pairs = []
    for k, body in enumerate(bodies):
        if k % 2:
            f, m = _timed(floor, body), _timed(mock, body)
        else:
            m, f = _timed(mock, body), _timed(floor, body)
        pairs.append((m, f))
    return FloorComparison(
        turn=turn,
        samples=samples,
        mock_us=statistics.median(m[0] for m, _ in pairs) * 1e6,
        floor_us=statistics.median(f[0] for _, f in pairs) * 1e6,
        ratio=statistics.median(m[0] / f[0] for m, f in pairs),
        cpu_ratio=statistics.median(m[1] / f[1] for m, f in pairs if f[1] > 0),
    )
