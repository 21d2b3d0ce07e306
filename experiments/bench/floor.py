"""The mock's per-request cost beside two floors, bare Starlette endpoints that parse the same body:
the floor answers small JSON; the reply floor answers the bytes and headers of a mock reply, so
the mock differs from it by the work of producing them and by how it is served (its own protocol
sends the reply in one write, uvicorn's sends a floor's in two), and the reply floor from the
floor by what sending the API's reply costs.

The servers run under uvicorn on loopback ports in this process, the mock as it serves itself
(`protocol.Http11`), the floors as uvicorn serves a Starlette app (its own httptools protocol),
and are timed by one
`httpx.Client` per server (one keep-alive connection each), request by request, interleaved:
each sample posts the same body to all three, in rotating order, so a noisy neighbour slows
every side of a sample alike. Each figure is the median of the per-sample ratios.

The bodies are shaped like a real agent loop's: sample k is conversation k (its own task
text) at turn t, and the mock has already answered that conversation at turn t - 1, as it
would have in a real run. Each body is sent once, so the mock never sees the exact request
twice (a retry would be cheaper still: see `retry` below).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mockprovider import SCENARIOS
from mockprovider.bench_hooks import transcript
from mockprovider.server import serve_in_thread

LISTING = "errors.log (2140 bytes)\naccess.log (812 bytes)\nnotes.txt (29 bytes)\nprivate.key (64 bytes)"
TASK = "Which file mentions a timeout?"
HEADERS = {"content-type": "application/json"}
UVICORNS = {"http": "httptools"}
"""How the floors are served: uvicorn's own protocol on httptools, as it serves any Starlette app."""


def runaway_messages(turns: int, *, task: str = TASK) -> list[dict[str, Any]]:
    """The messages a `runaway` client sends at turn index `turns`."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant with file tools."},
        {"role": "user", "content": task},
    ]
    for _ in range(turns):
        call = SCENARIOS["runaway"](transcript.conversation(messages)).tool_calls[0]
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


_OWN = frozenset({"date", "server", "content-length", "content-type"})
"""Headers every Starlette reply carries on its own: the reply floor adds only the others."""


async def _reply_endpoint(request: Request) -> Response:
    body = json.loads(await request.body())
    if not body["messages"]:
        raise ValueError("a body without messages")  # parsed, as the floor parses it, then unused
    content, headers = request.app.state.reply
    return Response(content, media_type="application/json", headers=headers)


def reply_floor_app() -> Starlette:
    """The floor, answering what the mock answers: the bytes and the headers of one mock reply
    (`teach`), so that it differs from the mock by the work of producing them (and by how each is
    served: `UVICORNS`)."""
    app = Starlette(routes=[Route("/v1/chat/completions", _reply_endpoint, methods=["POST"])])
    app.state.reply = (b"{}", {})
    return app


def teach(reply_floor: Starlette, response: httpx.Response) -> None:
    """Make `reply_floor` answer `response`'s body and headers (a mock's reply)."""
    headers = {k: v for k, v in response.headers.items() if k not in _OWN}
    reply_floor.state.reply = (response.content, headers)


@dataclass(frozen=True, kw_only=True)
class FloorComparison:
    turn: int
    samples: int
    mock_us: float
    """Median wall time of one request to the mock, client included."""
    floor_us: float
    ratio: float
    """Median of the per-request wall-time ratios mock / floor."""
    cpu_ratio: float
    """The same over CPU time (client and server threads): robust to a busy machine."""
    reply_floor_us: float
    reply_ratio: float
    """Median of the per-request ratios mock / reply floor: the cost of producing the reply."""
    reply_cost: float
    """Median of the per-request ratios reply floor / floor: what sending the reply's bytes and
    headers (the API's own) costs a bare endpoint."""


class Servers(NamedTuple):
    mock: httpx.Client
    floor: httpx.Client
    reply_floor: httpx.Client
    reply_app: Starlette


@contextmanager
def servers() -> Iterator[Servers]:
    """A fresh mock, a floor and a reply floor on loopback ports, with one keep-alive client each."""
    with ExitStack() as stack:
        reply_app = reply_floor_app()
        urls = [stack.enter_context(serve_in_thread())]
        urls += [stack.enter_context(serve_in_thread(app, uvicorn_options=UVICORNS))
                 for app in (bare_app(), reply_app)]
        clients = (stack.enter_context(httpx.Client(base_url=u, headers=HEADERS)) for u in urls)
        yield Servers(*clients, reply_app)


def _ok(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"{response.request.url} answered {response.status_code}: {response.text[:300]}")


def timed(client: httpx.Client, body: bytes, *,
          check: Callable[[httpx.Response], None] = _ok) -> tuple[float, float]:
    """Wall and process CPU seconds of one request; `check` raises on a reply that does not count."""
    wall, cpu = time.perf_counter(), time.process_time()
    response = client.post("/chat/completions", content=body)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    check(response)
    return wall, cpu


def compare(s: Servers, turn: int, *, samples: int, retry: bool = False) -> FloorComparison:
    """Interleaved per-request times of `samples` conversations at `turn` (see the module doc).

    With `retry`, every body is sent to the mock once beforehand: the measured request is
    then a resend of one the mock has answered, as a client's retry is.
    """
    tasks = [f"{TASK} (run {k} of a {samples}-run suite)" for k in range(samples)]
    bodies = [request_body(turn, task=task) for task in tasks]
    warm = bodies if retry else [request_body(turn - 1, task=task) for task in tasks]
    imitated = s.mock.post("/chat/completions", content=request_body(turn, task="a reply to imitate"))
    teach(s.reply_app, imitated)
    for body in warm[:8]:  # the connection and the caches of the floors' stack
        timed(s.floor, body)
        timed(s.reply_floor, body)
    for body in warm:
        timed(s.mock, body)
    clients = (s.mock, s.floor, s.reply_floor)
    rows = []
    for k, body in enumerate(bodies):
        times: dict[int, tuple[float, float]] = {}
        for j in (k % 3, (k + 1) % 3, (k + 2) % 3):  # each server goes first, second and third in turn
            times[j] = timed(clients[j], body)
        rows.append((times[0], times[1], times[2]))
    return FloorComparison(
        turn=turn,
        samples=samples,
        mock_us=statistics.median(m[0] for m, _, _ in rows) * 1e6,
        floor_us=statistics.median(f[0] for _, f, _ in rows) * 1e6,
        ratio=statistics.median(m[0] / f[0] for m, f, _ in rows),
        cpu_ratio=statistics.median(m[1] / f[1] for m, f, _ in rows if f[1] > 0),
        reply_floor_us=statistics.median(r[0] for _, _, r in rows) * 1e6,
        reply_ratio=statistics.median(m[0] / r[0] for m, _, r in rows),
        reply_cost=statistics.median(r[0] / f[0] for _, f, r in rows),
    )
