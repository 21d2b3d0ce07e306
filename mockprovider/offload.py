"""Large counts off the event loop: a prompt's new text past `INLINE_CHARS` is encoded on a worker
thread, so one huge request never holds every other client's reply (`/healthz` included)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

INLINE_CHARS = 32_768
"""New text up to this many characters is counted while it is read (a short, bounded encoding);
the messages past it are counted after the latency, on a worker thread."""


_COUNTERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="o200k")
"""Large counts run here (the encoder releases the GIL while it encodes); few threads, so a burst of huge
prompts queues instead of crowding the event loop off the CPU."""


async def off_the_loop_if_large(size: int, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, on a worker thread when `size` characters of text are more than INLINE_CHARS."""
    if size > INLINE_CHARS:
        return await asyncio.get_running_loop().run_in_executor(_COUNTERS, fn, *args)
    return fn(*args)


def text_chars(messages: Sequence[Mapping[str, Any]]) -> int:
    """About how many characters counting `messages` (checked ones: `read` has read them) encodes."""
    chars = 0
    for m in messages:
        content, calls = m.get("content"), m.get("tool_calls")
        chars += len(content) if type(content) is str else 0 if content is None else len(json.dumps(content))
        for call in calls or ():
            fn = call["function"]
            chars += len(call["id"]) + len(fn["name"]) + len(fn["arguments"])
    return chars


LARGE_BYTES = 256 * 1024
"""A request body over this many bytes is served off the server's event loop (`mockprovider.off_loop`)
and parsed by `parse_yielding`: a few milliseconds of work at least."""


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


YIELDING = json.JSONDecoder(object_hook=_as_is)
"""A decoder that calls back into Python once per object it reads: the interpreter may switch
threads there, which it never does inside one call of the C parser (a 10 MB body is a quarter of
a second of C, holding every other thread all that time, the server's loop too)."""


def parse_yielding(raw: bytes) -> Any:
    """`json.loads(raw)`, letting other threads in as it goes: for a body over LARGE_BYTES."""
    return json.loads(raw, object_hook=_as_is)
