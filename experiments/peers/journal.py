"""Counting at the provider: an ASGI middleware that journals every chat request the mock answers.

Frameworks report their own usage in their own words (or not at all); the mock cannot be fooled.
`Journal` wraps `mockprovider.create_app()` and records, per chat request, the request body (so
the exact text each framework sent back to the model can be read), the usage the mock billed
and how long the mock itself took, from the first byte of the request to the last byte of the
reply. `window()` returns the entries of one run, so runs are measured one after another; its
exit waits (bounded) for requests still in flight, so a request a cancelled run left behind is
counted in that run and not in the next. A complete 200 reply that carried no usage (a stream
without `include_usage`) is flagged `unbilled`: it is not 0 tokens, it is unknown.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness import Pricing, Usage

PRICING = Pricing()
"""The harness's default prices (the chapter's $2 in / $12 out per million), applied to the
tokens the mock billed, so every framework's row is priced exactly as ours."""
BODY_LIMIT = 2_000_000
"""Bodies above this are journalled as empty (the mock itself refuses them with 413)."""
DRAIN_S = 5.0
"""How long a window's exit waits for requests still in flight (a run's last reply is seconds
at most; a cut-off stream ends as soon as the mock notices the client went away)."""


@dataclass(frozen=True, kw_only=True)
class Entry:
    request: dict[str, Any]
    """The parsed request body ({} if it was not JSON)."""
    status: int
    prompt_tokens: int
    completion_tokens: int
    mock_s: float
    """Seconds between the request reaching the mock and its last reply byte leaving it."""
    complete: bool = True
    """False if the client went away before the last byte of the reply."""
    usage_found: bool = True

    @property
    def unbilled(self) -> bool:
        """A whole 200 reply without usage: its tokens are unknown, not zero."""
        return self.status == 200 and self.complete and not self.usage_found

    @property
    def cost_usd(self) -> float:
        return PRICING.cost(Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens))

    def tool_texts(self) -> dict[str, str]:
        """Every tool message in this request, by the call id it answers."""
        return {
            str(m.get("tool_call_id")): _text(m.get("content"))
            for m in self.request.get("messages", [])
            if isinstance(m, dict) and m.get("role") == "tool"
        }


def _text(content: Any) -> str:
    # OpenAI content may be a string or a list of text parts; frameworks use both.
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _usage(body: bytes) -> tuple[int, int] | None:
    """Usage from a JSON reply or from the usage chunk of an SSE stream; None if it has none."""
    chunks = [body] if body.lstrip().startswith(b"{") else [
        line[5:] for line in body.splitlines() if line.startswith(b"data:") and b'"usage"' in line
    ]
    for chunk in reversed(chunks):
        try:
            usage = json.loads(chunk).get("usage") or {}
        except (ValueError, AttributeError):
            continue
        if usage:
            return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return None


@dataclass
class Journal:
    """The middleware and its record, shared by the server thread and the measuring code."""

    app: ASGIApp
    entries: list[Entry] = field(default_factory=list)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _in_flight: int = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request, reply, status = bytearray(), bytearray(), [0]
        with self._lock:
            self._in_flight += 1

        async def recording_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(request) < BODY_LIMIT:
                request.extend(message.get("body", b""))
            return message

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                reply.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    # Before the last byte leaves: once the client has it, its run may end
                    # and close its journal window.
                    self._record(bytes(request), bytes(reply), status[0], time.perf_counter() - started,
                                 complete=True)
                    recorded[0] = True
            await send(message)

        recorded = [False]
        try:
            await self.app(scope, recording_receive, recording_send)
        finally:
            if not recorded[0]:  # the client went away before the reply was complete
                self._record(bytes(request), bytes(reply), status[0], time.perf_counter() - started,
                             complete=False)
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def _record(self, request: bytes, reply: bytes, status: int, seconds: float, *, complete: bool) -> None:
        try:
            body = json.loads(request) if len(request) < BODY_LIMIT else {}
        except ValueError:
            body = {}
        usage = _usage(reply) if status == 200 else (0, 0)
        prompt, completion = usage or (0, 0)
        entry = Entry(
            request=body if isinstance(body, dict) else {}, status=status,
            prompt_tokens=prompt, completion_tokens=completion, mock_s=seconds,
            complete=complete, usage_found=usage is not None,
        )
        with self._lock:
            self.entries.append(entry)

    @contextmanager
    def window(self) -> Iterator[list[Entry]]:
        """The entries recorded while the block runs (filled in when it exits)."""
        with self._lock:
            start = len(self.entries)
        seen: list[Entry] = []
        try:
            yield seen
        finally:
            with self._lock:
                # The mock runs in its own thread, so blocking here lets it finish what is in flight.
                self._lock.wait_for(lambda: self._in_flight == 0, timeout=DRAIN_S)
                seen.extend(self.entries[start:])
