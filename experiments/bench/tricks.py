"""Each of the mock's speed tricks timed against the plain code it replaces, in one run.

A `Trick` is two batches of the same work: `with_` runs the mock's code, `without` the plain
equivalent (the mock's own slower path where it has one, else the straightforward code written
in `experiments.bench.trick_pairs`). Both must give the same output, checked before timing. The
two are timed round by round, interleaved (each goes first every other round), so a noisy
neighbour slows both sides of a round alike; the ratio is the median of the per-round ratios
without / with, and the time saved is the difference of the medians per use.

The share is what the trick saves on one request, as a part of the time that request would take
in-process without it (the request's time is the `ChatLane` trick's own `with_` side at the
same turn: the ASGI app called directly, every trick on).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Batch = Callable[[int], Callable[[], Any]]
"""Given n, a callable that does the work n times (anything it needs prepared is prepared
before it is returned, outside the timing) and returns the last output."""

LANE = "ChatLane"
"""The trick whose `with_` side is a whole request: the reference the shares are taken of."""


@dataclass(frozen=True, kw_only=True)
class Trick:
    name: str
    where: str
    turn: int
    """The conversation turn of the request whose work is timed (1, or 100 for the memory)."""
    with_: Batch
    without: Batch
    key: Callable[[Any], Any] = lambda out: out
    """What of an output must be equal on both sides (drops ids and clock readings)."""
    uses: int = 1
    """Times the work runs per request of `turn` on the chat route's JSON reply (0: another path)."""
    batch: int | None = None
    """A fixed batch size (1 where each use needs its own preparation); None: calibrated."""
    self_timed: bool = False
    """Each batch times itself, returning (its last output, its seconds): the seconds of what the
    trick changes (the time until a reply is written, where the trick moves work after it)."""


@dataclass(frozen=True, kw_only=True)
class Saving:
    """One trick's figures."""

    trick: str
    where: str
    turn: int
    with_us: float
    without_us: float
    ratio: float
    """Median of the per-round ratios without / with."""
    rounds: int
    share: float | None
    """(without - with) x uses: what the trick saves, as a part of the in-process time a request at
    `turn` would take without it; None where that request does not use it."""


def repeat(work: Callable[[], Any]) -> Batch:
    def batch(n: int) -> Callable[[], Any]:
        def go() -> Any:
            for _ in range(n):
                out = work()
            return out
        return go
    return batch


def drive(coro: Any) -> Any:
    """Run a coroutine that never waits (no event loop needed); raise if it does wait."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the coroutine waited; time it on an event loop")


@contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    kept = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, kept)


def patched_batch(batch: Batch, module: Any, name: str, value: Any) -> Batch:
    """`batch`, with `module.name` swapped for `value` while it runs."""
    def patched(n: int) -> Callable[[], Any]:
        go = batch(n)

        def run() -> Any:
            with _patched(module, name, value):
                return go()
        return run
    return patched



def _batch_size(run: Batch, target_s: float) -> int:
    go = run(1)
    go()  # warm: first calls fill caches and import lazily
    go = run(1)
    started = time.perf_counter()
    go()
    once = max(time.perf_counter() - started, 1e-7)
    return max(1, min(10_000, int(target_s / once)))


def _time(run: Batch, n: int, self_timed: bool = False) -> float:
    go = run(n)
    started = time.perf_counter()
    out = go()
    return (out[1] if self_timed else time.perf_counter() - started) / n


def _output(trick: Trick, run: Batch) -> Any:
    out = run(1)()
    return trick.key(out[0] if trick.self_timed else out)


def check_same(trick: Trick) -> None:
    """Raise if the two sides of `trick` disagree: a faster path must answer the same."""
    mine, plain = _output(trick, trick.with_), _output(trick, trick.without)
    if mine != plain:
        raise AssertionError(f"{trick.name}: with the trick {mine!r}, without it {plain!r}")


def measure(trick: Trick, *, rounds: int, batch_s: float = 0.002) -> tuple[float, float, float]:
    """(with µs, without µs, median ratio without / with) over `rounds` interleaved rounds; the
    time without is the time with times the ratio, so the two figures never disagree in sign."""
    check_same(trick)
    n = trick.batch or _batch_size(trick.with_, batch_s)
    mine, plain = [], []
    own = trick.self_timed
    for r in range(rounds):
        if r % 2:
            plain.append(_time(trick.without, n, own))
            mine.append(_time(trick.with_, n, own))
        else:
            mine.append(_time(trick.with_, n, own))
            plain.append(_time(trick.without, n, own))
    ratio = statistics.median(p / m for m, p in zip(mine, plain, strict=True))
    with_us = statistics.median(mine) * 1e6
    return with_us, with_us * ratio, ratio


def savings(tricks: list[Trick], *, rounds: int, batch_s: float = 0.002) -> list[Saving]:
    """Every trick measured; shares taken of the `LANE` trick's request time at the same turn."""
    measured = {t.name + f"@{t.turn}": (t, measure(t, rounds=rounds, batch_s=batch_s)) for t in tricks}
    request_us = {t.turn: m[0] for t, m in measured.values() if t.name == LANE}
    out = []
    for trick, (with_us, without_us, ratio) in measured.values():
        total = request_us.get(trick.turn)
        saved = (without_us - with_us) * trick.uses
        share = saved / (total + saved) if trick.uses and total else None
        out.append(Saving(trick=trick.name, where=trick.where, turn=trick.turn, with_us=with_us,
                          without_us=without_us, ratio=ratio, rounds=rounds, share=share))
    return out
