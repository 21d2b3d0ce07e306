"""Answering one `tools/call`: pick its step (from the script, or from a tool given in code) and
play it: progress, waits, a hang until the client cancels, the side effect, then the answer.

A call the client cancels stops where it waits (the SDK cancels the handler when
`notifications/cancelled` names it), and the journal gets a `stopped` note. A `drop` or an
`expire` step answers here like any other; the transport (`mcp.http`, `mcp.stdio`) reads
`McpHost.faults` and loses that answer with the connection, or ends the session after it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from mockprovider.mcp.callable import Answer, CallableTool, ToolRequest
from mockprovider.mcp.catalog import Tool
from mockprovider.mcp.host import McpHost, Where
from mockprovider.scripts.mcp_conditions import CallFacts
from mockprovider.scripts.mcp_tools import ScriptEnded, Step

Context = ServerRequestContext[Any, Any]
SESSION_HEADER = "mcp-session-id"


def where(ctx: Context) -> Where:
    """The endpoint and session of a message: from its HTTP request, or a stdio server's defaults."""
    request = ctx.request
    if request is None:
        return Where(path="stdio", selection=None, session=None)
    return Where(path=request.url.path, selection=request.path_params.get("scenario"),
                 session=request.headers.get(SESSION_HEADER))


async def answer(host: McpHost, ctx: Context, tool: Tool, call: CallFacts, *,
                 scenario: str | None) -> dict[str, Any]:
    """The `CallToolResult` of `call`, or the `MCPError` its step scripts."""
    place = where(ctx)
    if isinstance(tool, CallableTool):
        step, tool_effect = await _from_code(host, ctx, place, tool, call), False
    else:
        try:
            step, tool_effect = tool.step(call), tool.effect
        except ScriptEnded as e:
            raise MCPError(INTERNAL_ERROR, str(e)) from None
    await _wait(host, ctx, place, step, call)
    if step.runs_effect(tool_effect):
        host.effect(place, call, ctx.request_id, scenario)
    if step.answer == "drop" or step.expire:
        host.faults[(place.session, ctx.request_id)] = "drop" if step.answer == "drop" else "expire"
    if step.answer == "error":
        assert step.error is not None
        raise MCPError(step.error.code, step.error.message, step.error.data)
    return step.result()


async def _wait(host: McpHost, ctx: Context, place: Where, step: Step,
                call: CallFacts) -> None:
    """The step's progress and waits; a hang waits for the client's cancellation."""
    with _noting_a_stop(host, ctx, place, call):
        for progress in step.progress:
            if step.progress_interval_ms:
                await anyio.sleep(step.progress_interval_ms / 1000)
            await ctx.session.report_progress(progress.progress, progress.total, progress.message)
        if step.answer == "hang":
            await anyio.sleep_forever()
        if step.delay_ms:
            await anyio.sleep(step.delay_ms / 1000)


@contextmanager
def _noting_a_stop(host: McpHost, ctx: Context, place: Where, call: CallFacts) -> Iterator[None]:
    """Journal a `stopped` note when the wait inside is cancelled (by the client, or the session's end)."""
    try:
        yield
    except anyio.get_cancelled_exc_class():
        host.note(place, "stopped", tool=call.name, id=ctx.request_id, index=call.index)
        raise


async def _from_code(host: McpHost, ctx: Context, place: Where, tool: CallableTool,
                     call: CallFacts) -> Step:
    async def progress(done: float, total: float | None = None, message: str | None = None) -> None:
        await ctx.session.report_progress(done, total, message)

    request = ToolRequest(
        name=call.name, arguments=call.arguments, index=call.index, key=call.key, session=place.session,
        progress=progress, effect=lambda: host.effect(place, call, ctx.request_id, None),
    )
    with _noting_a_stop(host, ctx, place, call):
        given = await tool.call(request)
    return as_step(given)


def as_step(given: Answer) -> Step:
    """A tool function's answer as a step: a text, a `CallToolResult` mapping, or a step already."""
    if isinstance(given, Step):
        return given
    if isinstance(given, str):
        return Step(answer="result", content=({"type": "text", "text": given},))
    if isinstance(given, Mapping):
        structured = given.get("structuredContent")
        return Step(answer="result", content=tuple(given.get("content", ())),
                    is_error=bool(given.get("isError")),
                    structured=dict(structured) if structured is not None else None)
    raise TypeError(f"a tool function returns a str, a CallToolResult mapping or a Step, "
                    f"got {type(given).__name__}")
