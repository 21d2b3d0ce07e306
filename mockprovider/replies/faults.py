"""Latency and injected faults: the wait before a reply, and what a fault answers instead of it.

A fault is picked by (turn, attempt) from the request's options (`scripts.options`), the attempt
read from the client's own retry header; latency waits without holding anything, and drops the
work as soon as the client leaves.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping
from typing import assert_never

from starlette.requests import Request

from mockprovider.errors import APIError, ClientGone
from mockprovider.metrics import fault_injected
from mockprovider.reading import attempts
from mockprovider.reading.request_headers import header_map
from mockprovider.scripts.options import Fault, Options, attempt_of

log = logging.getLogger("mockprovider")

HANG_LIMIT_S = 300.0
"""A hung response waits for the client to give up, but never longer than this."""


async def wait_unless_gone(request: Request, seconds: float) -> None:
    """Sleep `seconds`, or raise `ClientGone` as soon as the client disconnects.

    The body is read by now, so the next ASGI message is the disconnect (servers send
    nothing else); waiting for it costs nothing while the client stays.
    """
    # The event loop's timer may fire a little early (uvloop's clock has millisecond steps): wait
    # out the rest, so a scripted latency is never shorter than asked.
    deadline = time.perf_counter() + seconds
    watcher = asyncio.ensure_future(request.receive())
    done: set = set()
    try:
        while not done and (left := deadline - time.perf_counter()) > 0:
            done, _ = await asyncio.wait({watcher}, timeout=left)
    finally:
        watcher.cancel()
    if not done:
        return
    if watcher.result().get("type") == "http.disconnect":
        raise ClientGone
    await asyncio.sleep(seconds)  # a server that sends something else: just wait (not expected)


def sent_attempt(headers: Mapping[bytes, bytes]) -> int:
    """The attempt the client says this request is (`attempt=sent`), from its headers (`header_map`)."""
    return attempt_of(*(None if (value := headers.get(name)) is None else value.decode("latin-1")
                        for name in attempts.SENT))


LOG_LINES = "MOCK_LOG_LINES"
"""`1`: `app_from_env` has its process print the per-request line (`print_log_lines`); `0`: not.
Set by `python -m mockprovider --workers N` for its workers, separate processes that configure
their own logging. A process whose root logger already has a handler keeps its own logging."""


def print_log_lines(on: bool) -> None:
    """The CLI's logging: the per-request line on stderr (unless `on` is false: `--quiet`), its
    message alone; nothing, bar the records' lean flags, if the root logger has a handler already
    (`logging.basicConfig`)."""
    logging.basicConfig(level=logging.INFO if on else logging.WARNING, format="%(message)s")
    # Nothing printed names where it was logged from, its thread, process or task: its records
    # need not look them up (the logging HOWTO's "Optimization"), work each line would pay for.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging.logAsyncioTasks = False  # type: ignore[attr-defined]  # Python 3.12+


def log_request(model: str, turn: int, attempt: int, status: str) -> None:
    """The per-request log line (`python -m mockprovider` without `--quiet`)."""
    log.info("model=%s turn=%d attempt=%d status=%s", model, turn, attempt, status, stacklevel=2)


async def delay_or_fault(request: Request, model: str, turn: int, options: Options) -> Fault | None:
    """Wait the configured latency; the fault that answers this (turn, attempt), if any.

    Raises `ClientGone` if the client leaves during the wait, so its prompt's text past what
    reading counted is never counted.
    """
    fault = None
    if options.faults or log.isEnabledFor(logging.INFO):  # the attempt matters to nothing else
        seen = options.attempt == "seen"
        attempt = attempts.counted(request) if seen else sent_attempt(header_map(request))
        fault = options.fault_for(turn, attempt)
        if fault is None and seen:
            attempts.settle(request)
        elif fault is not None:
            fault_injected(request, fault.kind)
        log_request(model, turn, attempt, fault.kind if fault else "ok")
    if options.latency_ms:
        await wait_unless_gone(request, options.latency_ms / 1000)
    return fault



async def hang(request: Request) -> None:
    """Send nothing until the client gives up (or HANG_LIMIT_S passes)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_LIMIT_S
    # Polling is the only way to notice a disconnect without consuming the (already read) body.
    while loop.time() < deadline and not await request.is_disconnected():  # noqa: ASYNC110
        await asyncio.sleep(0.05)


MALFORMED_BODY = b'{"id": "chatcmpl-malformed", "choices": [{"index": 0, "mess'
"""What the `malformed` fault sends: JSON cut off mid-object, with status 200."""


async def injected(request: Request, fault: Fault, options: Options) -> APIError | bytes:
    """What an injected fault answers: an error for the wire format to render, or a broken body."""
    match fault.kind:
        case "429":
            wait_s = options.retry_ms / 1000
            return APIError(
                429,
                "Rate limit reached (injected fault); retry after the interval in Retry-After.",
                type="requests",
                code="rate_limit_exceeded",
                headers={"retry-after": str(math.ceil(wait_s)), "retry-after-ms": str(options.retry_ms)},
            )
        case "500" | "stream_error":  # stream_error on a reply that is not streamed: a plain 500
            return APIError(500, "The server had an error (injected fault).", type="server_error")
        case "529":
            return APIError(529, "Overloaded (injected fault).", type="overloaded_error")
        case "401":
            return APIError(401, "Incorrect API key (injected fault).", code="invalid_api_key")
        case "hang":
            await hang(request)
            return APIError(504, "Hung response (injected fault) gave up.", type="server_error")
        case "malformed" | "drop":  # drop is answered by the route, which has the body to cut
            return MALFORMED_BODY
        case _:
            assert_never(fault.kind)

