"""The mock's own work per chat request, counted in CPU instructions under valgrind's callgrind.

Wall-clock timings on a shared machine swing with its load; the instructions a request executes
barely do. One process runs under callgrind; each measured batch runs inside a call of
`functools.reduce` (which nothing else here calls), and callgrind dumps its counts before and
after that function, so each batch's instructions land in a file of their own, start-up and
preparation excluded. Requests are driven in-process (the ASGI app called directly, no sockets),
each a new conversation at that turn whose previous turn the app has answered, as
`experiments.bench.floor` sends them; the bare Starlette floor answers the same bodies.

    python -m experiments.bench.instructions        # mock and floor, turns 1 and 100
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import glob
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from experiments.bench.floor import TASK, bare_app, request_body

REQUESTS = {1: 400, 100: 60}
"""Requests counted per (app, turn): enough that per-request figures are stable to a few hundred."""


def _bodies(turn: int, count: int) -> list[bytes]:
    """`count` conversations at `turn`, each its own task text (the same length each)."""
    template = request_body(turn)
    return [template.replace(TASK.encode(), f"{TASK} #{k:05d}".encode()) for k in range(count)]


def _headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """What httpx sends with a JSON body (as the floor bench's client does)."""
    return [(b"host", b"127.0.0.1:8000"), (b"accept", b"*/*"), (b"accept-encoding", b"gzip, deflate"),
            (b"connection", b"keep-alive"), (b"user-agent", b"python-httpx/0.28.1"),
            (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]


def counted(work: Callable[[], Any]) -> Any:
    """Run `work` inside `functools.reduce`, the function callgrind dumps around."""
    return functools.reduce(lambda _, __: work(), range(2), None)


def requests(app: Any, turn: int, n: int) -> Callable[[], None]:
    """`n` conversations' previous turn answered; returns the batch answering their turn `turn`."""
    from experiments.bench.trick_pairs import _scope, post

    path = "/v1/chat/completions"
    loop = asyncio.new_event_loop()

    async def answer(bodies: list[bytes], scopes: list[dict[str, Any]]) -> None:
        for body, scope in zip(bodies, scopes, strict=True):
            status, _, out = await post(app, scope, body)
            if status != 200:
                raise RuntimeError(f"answered {status}: {out[:300]!r}")

    def scopes(bodies: list[bytes]) -> list[dict[str, Any]]:
        return [_scope(path, "", _headers(b)) for b in bodies]

    warm, bodies = _bodies(turn - 1, n + 8), _bodies(turn, n + 8)
    loop.run_until_complete(answer(warm, scopes(warm)))  # each conversation's previous turn
    loop.run_until_complete(answer(bodies[n:], scopes(bodies[n:])))  # every other cache warm
    measured, measured_scopes = bodies[:n], scopes(bodies[:n])
    return lambda: loop.run_until_complete(answer(measured, measured_scopes))


def run() -> None:
    """Under callgrind: one counted batch per (turn, app), in the order `main` reads them."""
    from mockprovider import create_app

    for turn, n in REQUESTS.items():
        for make in (create_app, bare_app):
            batch = requests(make(), turn, n // 2)  # reduce runs it twice
            counted(batch)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)  # the process under callgrind
    if parser.parse_args(argv).run:
        run()
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
               "--dump-before=functools_reduce", "--dump-after=functools_reduce",
               sys.executable, "-m", "experiments.bench.instructions", "--run"]
        done = subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True,
                              text=True, check=False)
        if done.returncode:
            raise RuntimeError(done.stderr[-3000:])
        regions = []
        for path in sorted(glob.glob(out + ".*"), key=lambda p: int(p.rsplit(".", 1)[1])):
            with open(path) as f:
                text = f.read()
            if "Trigger: --dump-after=functools_reduce" in text:  # one counted batch
                regions.append(int(re.search(r"^totals: (\d+)", text, re.M)[1]))
    for k, (turn, n) in enumerate(REQUESTS.items()):
        mock, floor = regions[2 * k] / n, regions[2 * k + 1] / n
        print(f"turn {turn}: instructions per request: mock {mock:,.0f}, floor {floor:,.0f}; "
              f"mock / floor {mock / floor:.3f}×", flush=True)


if __name__ == "__main__":
    main()
