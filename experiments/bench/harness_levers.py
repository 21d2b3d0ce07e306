"""Each lever of the harness's per-turn cost beside the plain code it replaced: same input, same
output (checked), timed round by round, interleaved, as the mock's speed tricks are
(`experiments.bench.tricks`). A lever's row says what one use costs with and without it and
what it saves per turn of `runaway` (its uses per turn times the difference); `make bench` puts
the rows on results/bench.md, and `make bench-check` fails if one stops saving anything.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from experiments.bench.tricks import Batch, Trick, measure, repeat
from harness.cancel import Cancel, Cancelled
from harness.codec import _field_names, dumps
from harness.state import ToolRun
from harness.usage import Usage


@dataclass(frozen=True, kw_only=True)
class Lever:
    trick: Trick
    uses: int
    """Times one turn of `runaway` (a model call, a `list_files` call, one save) uses it."""


@dataclass(frozen=True, kw_only=True)
class LeverRow:
    lever: str
    where: str
    with_us: float
    without_us: float
    ratio: float
    saved_per_turn_us: float
    rounds: int


def _turn_items() -> list[Any]:
    """What a turn of `runaway` adds to a run, as a save encodes it."""
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_7", "name": "list_files", "content": "notes.txt\nsrc/\n"},
        Usage(prompt_tokens=1234, completion_tokens=12),
        ToolRun(tool="list_files", args={}, call_id="call_7", ok=True, ms=0.25, details={}),
    ]


def _fields_copied(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {name: getattr(obj, name) for name in _field_names(type(obj))}
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def encoder_lever() -> Lever:
    """`codec.dumps`: one C encoder for the process, dataclasses read through their `__dict__`;
    plainly, `JSONEncoder.encode` (a new C encoder per call) and a dict of the fields copied."""
    items, plain = _turn_items(), json.JSONEncoder(separators=(",", ":"), allow_nan=False,
                                                    default=_fields_copied).encode
    return Lever(uses=1, trick=Trick(
        name="a turn's rows encoded by one kept encoder", where="codec.dumps", turn=1,
        with_=repeat(lambda: [dumps(x) for x in items]), without=repeat(lambda: [plain(x) for x in items])))


async def _raced(work: Any, cancel: Cancel) -> Any:
    """The plain way: the call and a waiter on the signal as two tasks, whichever ends first."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, waiter):
            if not t.done():
                t.cancel()
        await asyncio.gather(task, waiter, return_exceptions=True)
    if task.cancelled():
        raise Cancelled(cancel.reason or "cancelled")
    return task.result()


async def _reply() -> int:
    await asyncio.sleep(0)  # a model call waits on its socket at least once
    return 1


def _on_a_loop(one: Callable[[Cancel], Any]) -> Batch:
    def batch(n: int) -> Callable[[], Any]:
        async def many() -> Any:
            cancel = Cancel()
            for _ in range(n):
                out = await one(cancel)
            return out

        def go() -> Any:
            loop = asyncio.new_event_loop()
            try:
                return loop.run_until_complete(many())
            finally:
                loop.close()
        return go
    return batch


def cancel_lever() -> Lever:
    """The model call cancelled by the run's signal from inside its own task
    (`Cancel.cancels_this_task`), against racing it with a waiter task."""
    async def scoped(cancel: Cancel) -> int:
        with cancel.cancels_this_task():
            return await _reply()

    return Lever(uses=1, trick=Trick(
        name="the model call cancelled without a second task", where="Cancel.cancels_this_task", turn=1,
        with_=_on_a_loop(scoped), without=_on_a_loop(lambda cancel: _raced(_reply(), cancel)), batch=200))


def levers() -> list[Lever]:
    return [cancel_lever(), encoder_lever()]


def lever_rows(chosen: list[Lever], *, rounds: int) -> list[LeverRow]:
    rows = []
    for lever in chosen:
        with_us, without_us, ratio = measure(lever.trick, rounds=rounds)
        rows.append(LeverRow(lever=lever.trick.name, where=lever.trick.where, with_us=with_us,
                             without_us=without_us, ratio=ratio,
                             saved_per_turn_us=(without_us - with_us) * lever.uses, rounds=rounds))
    return rows
