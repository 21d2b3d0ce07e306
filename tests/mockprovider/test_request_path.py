"""One chat request reads top to bottom through the mock's folders: the route, the chat module,
`reading`, `replies` (latency and faults), `reading` (the count finished), the scenario,
`replies` (the reply completed) — each folder visited at most twice, traced as it runs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

import mockprovider
from mockprovider.app import create_app

ROOT = Path(mockprovider.__file__).parent
KERNEL = {"errors.py", "journal.py", "metrics.py", "offload.py"}
"""Modules every folder may use: calling them is no visit."""


def folder_of(filename: str) -> str | None:
    """The mock's folder a function lives in (`top` for the top-level modules); None outside the mock
    and for the kernel."""
    try:
        parts = Path(filename).relative_to(ROOT).parts
    except ValueError:
        return None
    if len(parts) == 1:
        return None if parts[0] in KERNEL else "top"
    return parts[0]


def visits(calls: list[tuple[str | None, str]]) -> Counter[str]:
    """How often each folder is entered from another: `calls` are (caller's folder, callee's folder)."""
    return Counter(callee for caller, callee in calls if caller != callee)


def traced(body: dict[str, Any]) -> tuple[list[tuple[str | None, str]], dict[str, Any]]:
    """Every call into the mock while it answers `body`, as (caller's folder, callee's folder); the
    caller is the nearest frame in a folder, so a call through the standard library, starlette or
    the kernel (`offload` calling back) counts from where it started; and the reply."""
    calls: list[tuple[str | None, str]] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or (callee := folder_of(frame.f_code.co_filename)) is None:
            return
        caller = frame.f_back
        while caller is not None and folder_of(caller.f_code.co_filename) is None:
            caller = caller.f_back
        calls.append((None if caller is None else folder_of(caller.f_code.co_filename), callee))

    async def post() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=create_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://mock") as client:
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200  # warm
            sys.setprofile(profile)
            try:
                reply = await client.post("/v1/chat/completions", json=body)
            finally:
                sys.setprofile(None)
            assert reply.status_code == 200, reply.text
            return reply.json()

    return calls, asyncio.run(post())


def agent_turn(turn: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [{"type": "function", "function": {"name": name, "parameters": schema}}
             for name in ("list_files", "read_file")]
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are careful."},
                                      {"role": "user", "content": "Which file mentions a timeout?"}]
    for i in range(turn - 1):
        call = {"id": f"c{i}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{i}.py"})}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{i}",
                      "content": f"contents of f{i}.py: " + "x = 1\n" * 20}]
    return {"model": "plan", "messages": messages, "tools": tools}


def test_one_chat_request_visits_each_folder_at_most_twice():
    cached = []
    for turn in (1, 3, 40):  # turn 40's prompt is long enough to read from the cache
        calls, reply = traced(agent_turn(turn))
        seen = visits(calls)
        assert set(seen) >= {"top", "apis", "reading", "replies", "scripts"}, seen
        assert max(seen.values()) <= 2, (turn, seen)
        cached.append(reply["usage"]["prompt_tokens_details"]["cached_tokens"])
    assert cached[0] == cached[1] == 0 < cached[2], cached


def test_a_path_that_goes_back_and_forth_is_counted_as_it_goes():
    back_and_forth = [(None, "top"), ("top", "apis"), ("apis", "reading"), ("reading", "reading"),
                      ("apis", "replies"), ("apis", "reading"), ("apis", "reading")]
    assert visits(back_and_forth) == {"top": 1, "apis": 1, "reading": 3, "replies": 1}
