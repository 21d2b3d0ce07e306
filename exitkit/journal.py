"""What the provider saw: every chat request and the reply the mock gave it.

The mock's own request journal (`mockprovider.journal`) keeps the requests; the kit also needs
each reply's status, the tokens the mock billed and the text it answered, so it wraps the mock
in this ASGI middleware and records the whole exchange. Nothing here trusts an agent's own
report: a framework may count usage in its own words, or not at all; the provider cannot be
fooled.

`window()` yields the entries of one run (runs are measured one after another; a child process
talking to the same mock lands in the window open at the time). Its exit waits, bounded, for
requests still in flight, so a request a cancelled run left behind counts in that run. A window
may carry a `guard`: requests past it get a 400 from the kit, so an agent that ignores every
limit still ends (the report says the guard stopped it).
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

PRICE_IN_PER_M, PRICE_OUT_PER_M = 2.00, 12.00
"""The chapter's prices, applied to the tokens the mock billed, so every agent is priced alike."""
BODY_LIMIT = 2_000_000
DRAIN_S = 5.0
CHAT = "/chat/completions"
MODEL_PATHS = (CHAT, "/responses", "/messages", ":generateContent", ":streamGenerateContent", "/api/chat",
               "/api/generate")
"""Every endpoint where the mock answers as a model: the kit reads Chat Completions; a request to
any other is still recorded (and guarded), so an agent speaking another API is seen, not missed."""
RUN_PREFIX = "/k/"
"""Each run's base URL is the mock's under `/k/<run>/`: the journal strips the prefix, and refuses a
request for a run other than the open window's, so what a finished run left behind (a thread, a
process) cannot send requests into a later run's window."""
ENDED_MESSAGE = "exitkit: this request belongs to a run that is not running any more ({run!r})"
GUARD_MESSAGE = "exitkit: the kit's outside guard of {n} requests was reached; this run ignores its limits"


@dataclass(frozen=True, kw_only=True)
class Entry:
    request: dict[str, Any]
    """The parsed request body ({} if it was not JSON)."""
    status: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reply_text: str = ""
    """The assistant text the mock answered (empty for a reply that only calls tools)."""
    reply_calls: tuple[str, ...] = ()
    """Names of the tools the reply asked for."""
    error: str = ""
    """The error message of a non-200 reply."""
    started: float = 0.0
    """`time.time()` when the request reached the mock (comparable with the ledger's times)."""
    mock_s: float = 0.0
    """Seconds from the request reaching the mock to its last reply byte leaving it."""
    complete: bool = True
    """False if the client went away before the whole reply."""
    guarded: bool = False
    path: str = "/v1/chat/completions"
    """The endpoint the request went to."""
    usage_found: bool = True
    """False for a whole 200 reply that carried no usage (a stream without `include_usage`): its
    tokens are unknown, not zero."""

    @property
    def unbilled(self) -> bool:
        return self.status == 200 and self.complete and not self.usage_found

    @property
    def cost_usd(self) -> float:
        return (self.prompt_tokens * PRICE_IN_PER_M + self.completion_tokens * PRICE_OUT_PER_M) / 1e6

    def messages(self) -> list[dict[str, Any]]:
        return [m for m in self.request.get("messages", []) if isinstance(m, dict)]

    def tool_texts(self) -> dict[str, str]:
        """Every tool message in this request, by the call id it answers."""
        return {str(m.get("tool_call_id")): text_of(m.get("content"))
                for m in self.messages() if m.get("role") == "tool"}

    def answered(self, tool: str) -> list[str]:
        """The text each tool message sent back for a call of `tool`, in the order of the calls,
        under whatever ids the agent gave them."""
        texts = self.tool_texts()
        return [texts[str(c.get("id"))] for m in self.messages() if m.get("role") == "assistant"
                for c in m.get("tool_calls") or []
                if isinstance(c, dict) and (c.get("function") or {}).get("name") == tool
                and str(c.get("id")) in texts]

    def carrying(self, text: str) -> tuple[str, str] | None:
        """The first message whose text carries `text`, as (its role, its text): a tool's result
        may come back in a tool message or, in some frameworks, as user text."""
        texts = ((str(m.get("role")), text_of(m.get("content"))) for m in self.messages())
        return next(((role, t) for role, t in texts if text in t), None)

    def unanswered_calls(self) -> list[str]:
        """Ids of assistant tool calls that no tool message answers (what real APIs refuse)."""
        answered = set(self.tool_texts())
        return [str(c.get("id")) for m in self.messages() if m.get("role") == "assistant"
                for c in m.get("tool_calls") or []
                if isinstance(c, dict) and str(c.get("id")) not in answered]


def text_of(content: Any) -> str:
    # OpenAI content may be a string or a list of text parts; frameworks use both, and some nest
    # parts in parts.
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) + text_of(p.get("content")) for p in content
                       if isinstance(p, dict))
    return "" if content is None else str(content)


def _reply(body: bytes) -> dict[str, Any]:
    """Usage, text and tool names from a JSON reply or an SSE stream."""
    if body.lstrip().startswith(b"{"):
        try:
            data = json.loads(body)
        except ValueError:
            return {}
        message = (data.get("choices") or [{}])[0].get("message") or {}
        return {"usage": data.get("usage"), "text": text_of(message.get("content")),
                "calls": [c["function"]["name"] for c in message.get("tool_calls") or []]}
    text, calls, usage = [], [], None
    for line in body.splitlines():
        if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except ValueError:
            continue
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            calls += [c["function"]["name"] for c in delta.get("tool_calls") or []
                      if (c.get("function") or {}).get("name")]
    return {"usage": usage, "text": "".join(text), "calls": calls}


def _error(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return body[:200].decode("utf-8", errors="replace")


async def _answer_400(receive: Receive, send: Send, message: str, code: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


@dataclass
class Journal:
    """The middleware and its record, shared by the server thread and the kit."""

    app: ASGIApp
    entries: list[Entry] = field(default_factory=list)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _in_flight: int = 0
    _window_start: int = 0
    _guard: int | None = None
    _run: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(RUN_PREFIX):
            run, _, rest = scope["path"][len(RUN_PREFIX):].partition("/")
            if run != self._run:
                await _answer_400(receive, send, ENDED_MESSAGE.format(run=run), "exitkit_run_ended")
                return
            scope = {**scope, "path": "/" + rest, "raw_path": ("/" + rest).encode()}
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith(MODEL_PATHS):
            await self.app(scope, receive, send)
            return
        if self._over_guard():
            await self._refuse(scope, receive, send)
            return
        started, clock = time.time(), time.perf_counter()
        request, reply, status, recorded, whole = bytearray(), bytearray(), [0], [False], [False]
        with self._lock:
            self._in_flight += 1

        async def recording_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                whole[0] = not message.get("more_body", False)
                if len(request) < BODY_LIMIT:
                    request.extend(message.get("body", b""))
            return message

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                reply.extend(message.get("body", b""))
                if not message.get("more_body", False) and whole[0]:
                    # Before the last byte leaves: once the client has it, its run may end.
                    self._record(bytes(request), bytes(reply), status[0], started,
                                 time.perf_counter() - clock, complete=True, path=scope["path"])
                    recorded[0] = True
            await send(message)

        try:
            await self.app(scope, recording_receive, recording_send)
        finally:
            # A body its client never finished sending (the process died mid-upload) asked nothing.
            if not recorded[0] and whole[0]:
                self._record(bytes(request), bytes(reply), status[0], started, time.perf_counter() - clock,
                             complete=False, path=scope["path"])
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()

    def _over_guard(self) -> bool:
        with self._lock:
            return self._guard is not None and len(self.entries) - self._window_start >= self._guard

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = GUARD_MESSAGE.format(n=self._guard)
        with self._lock:
            self.entries.append(Entry(request={}, status=400, error=message, started=time.time(),
                                      guarded=True, path=scope["path"]))
        await _answer_400(receive, send, message, "exitkit_guard")

    def _record(self, request: bytes, reply: bytes, status: int, started: float, seconds: float, *,
                complete: bool, path: str) -> None:
        try:
            body = json.loads(request) if len(request) < BODY_LIMIT else {}
        except ValueError:
            body = {}
        got = _reply(reply) if status == 200 and path.endswith(CHAT) else {}
        usage = got.get("usage") or {}
        entry = Entry(
            request=body if isinstance(body, dict) else {}, status=status,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            reply_text=got.get("text", ""), reply_calls=tuple(got.get("calls", ())),
            error="" if status == 200 else _error(reply), started=started, mock_s=seconds, complete=complete,
            usage_found=bool(got.get("usage")) or status != 200, path=path,
        )
        with self._lock:
            self.entries.append(entry)

    @contextmanager
    def window(self, *, guard: int | None = None, run: str | None = None) -> Iterator[list[Entry]]:
        """The entries recorded while the block runs (filled in when it exits); requests under
        `RUN_PREFIX` are let in only for `run`."""
        with self._lock:
            start = len(self.entries)
            self._window_start, self._guard, self._run = start, guard, run
        seen: list[Entry] = []
        try:
            yield seen
        finally:
            with self._lock:
                # The mock runs in its own thread, so blocking here lets it finish what is in flight.
                self._lock.wait_for(lambda: self._in_flight == 0, timeout=DRAIN_S)
                seen.extend(self.entries[start:])
                self._guard = self._run = None
