"""An exchange that lasts only while its client is there.

A client that disconnects while the recorder waits on the upstream (a model on a CPU can think
for minutes) takes the upstream request with it: the connection to the upstream is closed at
once, and the reply, never seen whole, is not recorded. The turn stays unrecorded, so the next
run records it afresh; nothing partial is ever filed as a reply. (A stream the client leaves is
stopped the same way, by the streaming response's own disconnect watch: `proxy._relay`.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from starlette.requests import Request
from starlette.responses import Response

GONE = "not recorded: the client left before the reply was whole; the upstream request was closed"


async def while_present(request: Request, log: Callable[[str], None],
                        forward: Callable[[], Awaitable[Response]]) -> Response:
    """`forward()`, cancelled the moment the client disconnects: the upstream request is closed
    with it (a slow upstream is never read for nobody), and its reply, not whole, is not recorded."""
    answer: list[Response] = []
    failed: list[Exception] = []

    async def run() -> None:
        try:
            answer.append(await forward())
        except Exception as e:  # noqa: BLE001 - raised below, outside the task group's exception group
            failed.append(e)
        group.cancel_scope.cancel()

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":  # the body is read: nothing else comes
            pass
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        group.start_soon(run)
    if failed:
        raise failed[0]
    if not answer:
        log(GONE)
        return Response(status_code=499)  # nobody reads it
    return answer[0]
