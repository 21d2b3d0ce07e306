"""The mock's speed tricks, each as the mock's code and the plain code it replaces (see `tricks`).

Every pair works on what a real client sends: the body of an agent loop's turn-1 request (the
`runaway` scenario with its tool offered, as `experiments.bench.floor` builds it) and the
headers the official `openai` client sends with it. Where the mock has its own slower path, the
plain side takes it (the router instead of `ChatLane`, `json.loads` instead of `memo.parse`);
where a trick is a cache, the plain side calls the function the cache wraps.
"""

from __future__ import annotations

import asyncio
import json
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import make_dataclass
from operator import attrgetter
from typing import Any, NamedTuple

import httpx
from starlette.requests import Request

import o200k
from experiments.bench.floor import TASK, request_body
from experiments.bench.trick_lane import NeverKept, common_case_trick, kept_message_trick
from experiments.bench.trick_protocol import (
    answered_at_once_trick,
    remembered_later_trick,
    started_without_task_trick,
)
from experiments.bench.trick_shortcuts import header_tricks, shortcut_tricks
from experiments.bench.tricks import LANE, Batch, Trick, drive, patched_batch, repeat
from mockprovider import create_app
from mockprovider.bench_hooks import (
    body as reading_body,
)
from mockprovider.bench_hooks import (
    chat,
    completions,
    memo,
    request_headers,
    scenarios,
    transcript,
    validation,
)


def client_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers the official `openai` client sends with `body`, as an ASGI server passes them."""
    import openai  # a test client: only the benchmarks need it

    seen: list[list[tuple[bytes, bytes]]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.raw)
        return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0,
                                         "model": "runaway", "choices": []})

    http = httpx.Client(transport=httpx.MockTransport(answer))
    client = openai.OpenAI(api_key="sk-bench", base_url="http://mock/v1", http_client=http)
    client.chat.completions.create(model="runaway", messages=[{"role": "user", "content": "hi"}])
    http.close()
    sent = [(k.lower(), v) for k, v in seen[0] if k.lower() != b"content-length"]
    return [*sent, (b"content-length", b"%d" % len(body))]


# --- the whole request: ChatLane against the router ------------------------------------------

ROUTER_ROOT = "/via-router"
"""A root path: the lane leaves such a request to the router, which strips it and routes to the
same endpoint, so both sides run the same endpoint on the same body and headers."""


def _scope(path: str, root_path: str, raw_headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": root_path + path, "raw_path": (root_path + path).encode(),
            "root_path": root_path, "query_string": b"", "headers": raw_headers,
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}


async def post(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, list, bytes]:
    """One request through the ASGI `app`: (status, headers, body). The app may write to `scope`."""
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    start: dict[str, Any] = {}
    parts: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop() if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        else:
            parts.append(message.get("body", b""))

    await app(scope, receive, send)
    return start["status"], start["headers"], b"".join(parts)


def _reply_key(out: tuple[int, list, bytes]) -> tuple[Any, ...]:
    status, head, body = out
    reply = json.loads(body)
    for varying in ("id", "created"):
        reply.pop(varying, None)
    return status, sorted(name for name, _ in head), reply


def _requests(app: Any, scope: dict[str, Any], body: bytes, loop: asyncio.AbstractEventLoop,
              prepare: Callable[[], None] | None = None) -> Batch:
    async def many(n: int) -> Any:
        for _ in range(n):
            out = await post(app, dict(scope), body)
        return out

    def batch(n: int) -> Callable[[], Any]:
        if prepare is not None:
            prepare()
        return lambda: loop.run_until_complete(many(n))
    return batch


def lane_tricks(loop: asyncio.AbstractEventLoop) -> list[Trick]:
    """The lane at turn 1, and at turn 100 with the turn-99 transcript remembered (a loop's case)."""
    app = create_app()
    raw1, raw99, raw100 = request_body(1), request_body(99), request_body(100)
    path = "/v1/chat/completions"
    turn_1 = Trick(
        name=LANE, where="apis/chat.py", turn=1, key=_reply_key,
        with_=_requests(app, _scope(path, "", client_headers(raw1)), raw1, loop),
        without=_requests(app, _scope(path, ROUTER_ROOT, client_headers(raw1)), raw1, loop),
    )
    entry = _entry(raw99)

    def previous_turn_only() -> None:
        memo.MEMORY.clear()
        memo.MEMORY.remember(entry)

    head = client_headers(raw100)
    turn_100 = Trick(
        name=LANE, where="apis/chat.py", turn=100, key=_reply_key, batch=1,
        with_=_requests(app, _scope(path, "", head), raw100, loop, previous_turn_only),
        without=_requests(app, _scope(path, ROUTER_ROOT, head), raw100, loop, previous_turn_only),
    )
    return [turn_1, turn_100]


# --- reading the body ------------------------------------------------------------------------


def _entry(raw: bytes) -> memo.Entry:
    """The memory's entry for `raw`'s transcript, as serving `raw` leaves it."""
    memory = memo.Memory()
    body, known = memo.parse(raw, memory)
    req = chat.chat_request(body, transcript.read(body["messages"], known))
    drive(transcript.prompt_tokens(req.transcript, req.tools))
    [entry] = memory._lru.values()
    return entry


def _read_and_count(raw: bytes, memory: memo.Memory | None) -> tuple[int, int, int]:
    """A chat body parsed, checked and counted: (turn, messages, prompt tokens)."""
    body, known = memo.parse(raw, memory) if memory is not None else (json.loads(raw), None)
    req = chat.chat_request(body, transcript.read(body["messages"], known))
    tokens = drive(transcript.prompt_tokens(req.transcript, req.tools))
    return req.transcript.turn, len(req.transcript.messages), tokens


def memory_trick() -> Trick:
    """Turn 100 of a loop whose turn 99 the memory holds, against parsing and reading it all."""
    raw99, raw100 = request_body(99), request_body(100)
    return Trick(name="transcript memory", where="memo.py", turn=100,
                 with_=_read_holding(memo.Memory, [_entry(raw99)], raw100),
                 without=repeat(lambda: _read_and_count(raw100, None)))


def _read_holding(make: Callable[[], memo.Memory], entries: list[memo.Entry], raw: bytes) -> Batch:
    """`raw` read and counted through a memory `make` gives, holding `entries` (a fresh one per use:
    reading it remembers its transcript in place of the one it extends)."""
    def batch(n: int) -> Callable[[], Any]:
        memories = [make() for _ in range(n)]
        for memory in memories:
            for entry in entries:
                memory.remember(entry)

        def go() -> Any:
            for memory in memories:
                out = _read_and_count(raw, memory)
            return out
        return go
    return batch


class _WalkingMemory(memo.Memory):
    """The lookup `memo.Memory.find` replaces (the `WALK` texts just below the request's place in
    sorted order, one after the other), for the row's misses only: a hit here keeps no LRU order
    and no lookup count."""

    def find(self, s: str, start: int) -> memo.Entry | None:
        if len(s) - start < memo.MIN_CHARS:
            return None
        q = s[start:]
        with self._lock:
            texts = self._texts
            i = bisect_right(texts, q)
            for j in range(i - 1, max(i - 1 - memo.WALK, -1), -1):
                if q.startswith(texts[j]):
                    return self._entries[j]
        return None


def rerun_trick(finished: int = 2 * memo.WALK) -> Trick:
    """Turn 100 of a run whose turn 99 the memory holds beside `finished` earlier runs of the same
    task that went further (a rerun, a benchmark's rounds): each of those sorts between the request
    and its turn 99, since the request goes on past its messages with `]` and they with `,`."""
    raw99, raw100 = request_body(99), request_body(100)
    entries = [_entry(raw99), *(_entry(request_body(t)) for t in range(101, 101 + finished))]
    # uses=0: the saving is the transcript memory's own (its row), had only where such runs are held.
    return Trick(name="transcript found past longer runs of its task", where="memo.Memory.find", turn=100,
                 with_=_read_holding(memo.Memory, entries, raw100),
                 without=_read_holding(_WalkingMemory, entries, raw100), uses=0)


_KEY_CHARS = 2048
"""The shortest key of the hashed index (the shortest transcript `memo` remembers)."""


class _HashedMemory:
    """The plain index `memo.Memory` replaces: each text filed under the hash of its longest prefix of
    _KEY_CHARS * 2**k characters, a lookup hashing the request's such prefixes, longest first."""

    def __init__(self) -> None:
        self._buckets: dict[int, list[memo.Entry]] = {}

    @staticmethod
    def _key(s: str, start: int, room: int) -> int:
        return hash(s[start : start + (_KEY_CHARS << ((room // _KEY_CHARS).bit_length() - 1))])

    def find(self, s: str, start: int) -> memo.Entry | None:
        room = len(s) - start
        while room >= _KEY_CHARS:
            for entry in self._buckets.get(self._key(s, start, room), ()):
                if s.startswith(entry.text, start):
                    return entry
            room = (_KEY_CHARS << ((room // _KEY_CHARS).bit_length() - 1)) - 1
        return None

    def remember(self, entry: memo.Entry, replaces: memo.Entry | None = None) -> None:
        if replaces is not None:
            self._buckets[self._key(replaces.text, 0, len(replaces.text))].remove(replaces)
        self._buckets.setdefault(self._key(entry.text, 0, len(entry.text)), []).append(entry)


def many_conversations_trick(conversations: int = 600) -> Trick:
    """Turn 100's body parsed (and its transcript remembered in place of turn 99's) with the turn-99
    transcripts of `conversations` conversations held, each use another conversation's."""
    template99, template100 = request_body(99), request_body(100)
    task = TASK.encode()
    raws = [template100.replace(task, b"%s #%05d" % (task, k)) for k in range(conversations)]
    entries = []
    for k in range(conversations):
        memory = memo.Memory()
        memo.parse(template99.replace(task, b"%s #%05d" % (task, k)), memory)[1].remember(transcript.EMPTY)
        entries.extend(memory._lru.values())

    def parsed(make: Callable[[], Any]) -> Batch:
        def batch(n: int) -> Callable[[], Any]:
            memories = [make() for _ in range(-(-n // conversations))]
            for memory in memories:
                for entry in entries:
                    memory.remember(entry)

            def go() -> Any:
                for k in range(n):
                    body, known = memo.parse(raws[k % conversations], memories[k // conversations])
                    known.remember(transcript.EMPTY)
                return known.count, body
            return go
        return batch

    return Trick(name="transcript found by bisecting, not by hashed prefixes", where="memo.Memory", turn=100,
                 with_=parsed(memo.Memory), without=parsed(_HashedMemory))


def remembered_tricks() -> list[Trick]:
    """Turn 100's checks with turn 99's transcript remembered: only the bytes and messages past it
    looked at, against the whole body (as a body nothing covers is checked)."""
    raw = request_body(100)
    memory = memo.Memory()
    memory.remember(_entry(request_body(99)))
    body, known = memo.parse(raw, memory)
    if known is None or known.span is None:
        raise RuntimeError("turn 99's transcript is not remembered")

    def counted_first() -> Any:
        if raw.count(b"[") + raw.count(b"{") <= validation.MAX_DEPTH:
            return None
        return validation.check_depth(raw, body, known)

    return [
        Trick(name="brackets of a remembered transcript not counted", where="validation.check_depth",
              turn=100, with_=repeat(lambda: validation.check_depth(raw, body, known)),
              without=repeat(counted_first)),
        Trick(name="remembered transcript not searched for escapes", where="validation.lone_surrogate",
              turn=100, with_=repeat(lambda: validation.refuse_lone_surrogates(raw, body, known)),
              without=repeat(lambda: validation.refuse_lone_surrogates(raw, body))),
    ]


def short_parse_trick(raw: bytes) -> Trick:
    return Trick(name="short body parsed by orjson", where="memo.parse", turn=1,
                 with_=repeat(lambda: memo.parse(raw)), without=repeat(lambda: (json.loads(raw), None)))


def _fresh_request(scope: dict[str, Any], body: bytes) -> Request:
    incoming = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return incoming.pop() if incoming else {"type": "http.disconnect"}
    return Request(dict(scope), receive)


async def plain_body(request: Request, declared: bytes, limit: int) -> bytes:
    """`body._read_body` through Starlette's `request.stream()`, the size cap checked as it grows."""
    if declared.isdigit() and int(declared) > limit:
        raise reading_body._too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise reading_body._too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def body_read_trick(scope: dict[str, Any], raw: bytes) -> Trick:
    declared, limit = b"%d" % len(raw), 1_000_000
    return Trick(
        name="body read from ASGI messages", where="body._read_body", turn=1,
        with_=repeat(lambda: drive(reading_body._read_body(_fresh_request(scope, raw), declared, limit))),
        without=repeat(lambda: drive(plain_body(_fresh_request(scope, raw), declared, limit))),
    )


HEADER_NAMES = (b"content-type", b"content-length", b"x-mock-options")
"""The headers a chat request looks up on a server with no key that does not log each request
(as the in-process app does; logging adds two, a key up to three)."""


def _mapped(scope: dict[str, Any]) -> tuple[str | None, ...]:
    request = Request(dict(scope))
    return tuple(request_headers.header(request, name) for name in HEADER_NAMES)


def _starlette_headers(scope: dict[str, Any]) -> tuple[str | None, ...]:
    request = Request(dict(scope))
    return tuple(request.headers.get(name.decode()) for name in HEADER_NAMES)


def header_trick(scope: dict[str, Any]) -> Trick:
    return Trick(name="one dict of raw headers", where="request_headers.header_map", turn=1,
                 with_=repeat(lambda: _mapped(scope)), without=repeat(lambda: _starlette_headers(scope)))


# --- reading the transcript ------------------------------------------------------------------


def _uncached(role: str, content: str | None, call_id: str | None, calls: o200k.CallFields) -> int:
    return o200k.fields_tokens(role, content, None, call_id, calls)


def plain_read(messages: list[Any]) -> transcript.Transcript:
    """`transcript.read` with every message read by `read_message` (no shape written out)."""
    turn, tool_text, calls, pending = 0, None, set(), {}
    tokens, counted, room, rest = transcript.EMPTY.tokens, 0, transcript.INLINE_CHARS, 0
    for i, m in enumerate(messages):
        chars, n = transcript.read_message(m, i, calls, room, pending)
        if n is None:
            rest += chars
        else:
            tokens, counted = tokens + n, i + 1
        room -= chars
        if m["role"] == "assistant":
            turn += 1
        elif m["role"] == "tool":
            text = o200k.text_of(m.get("content"))
            tool_text = text if tool_text is None else f"{tool_text}\n{text}"
    if pending:
        raise transcript.unanswered(pending)
    return transcript.Transcript(messages=messages, known=0, remember=None, turn=turn, tool_text=tool_text,
                      calls=frozenset(calls), counted=counted, tokens=tokens, rest_chars=rest)


def reading_tricks(messages: list[Any]) -> list[Trick]:
    read = repeat(lambda: transcript.read(messages))
    uncached_read = patched_batch(read, transcript, "_short_tokens", _uncached)
    return [
        Trick(name="common message shapes written out", where="transcript._read_new", turn=1,
              with_=uncached_read, without=patched_batch(repeat(lambda: plain_read(messages)),
                                                          transcript, "_short_tokens", _uncached)),
        Trick(name="short messages' counts cached", where="transcript._short_tokens", turn=1,
              with_=read, without=uncached_read),
    ]


def tools_count_trick(req: Any) -> Trick:
    counted = repeat(lambda: drive(transcript.prompt_tokens(req.transcript, req.tools)))
    never_kept = patched_batch(counted, transcript, "_keep_tools_count", lambda key, n: None)
    return Trick(name="tools' count kept", where="transcript.prompt_tokens", turn=1, with_=counted,
                 without=patched_batch(never_kept, transcript, "_TOOLS_COUNTED", {}))


def tools_key_trick(req: Any) -> Trick:
    """The kept tools' count looked up under orjson's text of the tools, against their repr."""
    counted = repeat(lambda: drive(transcript.prompt_tokens(req.transcript, req.tools)))
    return Trick(name="tools keyed by orjson's text", where="transcript.tools_key", turn=1, with_=counted,
                 without=patched_batch(counted, transcript, "tools_key", repr))


# --- the reply ---------------------------------------------------------------------------------


def scenario_trick(conversation: scenarios.Conversation) -> Trick:
    reply = repeat(lambda: scenarios.SCENARIOS["runaway"](conversation))
    return Trick(name="short tool calls' replies cached", where="scenarios._asked", turn=1, with_=reply,
                 without=patched_batch(reply, scenarios, "_asked", scenarios._reply))


def plain_render(c: completions.Completion) -> bytes:
    """What `JSONResponse(chat.body(c))` sends."""
    return json.dumps(chat.body(c), ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


def render_trick(c: completions.Completion) -> Trick:
    """The template on its own: the message it would find kept is written each time."""
    return Trick(name="reply written from a template", where="chat.render", turn=1,
                 with_=patched_batch(repeat(lambda: chat.render(c)), chat, "_MESSAGES", NeverKept()),
                 without=repeat(lambda: plain_render(c)))


def record_trick(record: NamedTuple, where: str) -> Trick:
    """A per-request NamedTuple against a frozen dataclass of the same fields: built, each field read once."""
    kind = type(record)
    fields = kind._fields
    dataclass_kind = make_dataclass(kind.__name__, [(f, Any) for f in fields], frozen=True, kw_only=True)
    values = record._asdict()
    read_all = attrgetter(*fields)
    return Trick(name=f"{kind.__name__} a NamedTuple", where=where, turn=1,
                 with_=repeat(lambda: read_all(kind(**values))),
                 without=repeat(lambda: read_all(dataclass_kind(**values))))


# --- all of them ---------------------------------------------------------------------------


def turn_1_parts() -> tuple[bytes, list[Any], Any, completions.Completion]:
    """A turn-1 body, its messages, its checked request and the completion the mock answers it with."""
    raw = request_body(1)
    body = json.loads(raw)
    req = chat.chat_request(body, transcript.read(body["messages"]))
    reply = scenarios.SCENARIOS["runaway"](req.transcript.conversation(req.tools))
    prompt_tokens = drive(transcript.prompt_tokens(req.transcript, req.tools))
    completion = completions.complete(reply, model=req.model, prompt_tokens=prompt_tokens, max_tokens=None)
    return raw, json.loads(raw)["messages"], req, completion


def all_tricks(loop: asyncio.AbstractEventLoop) -> list[Trick]:
    raw, messages, req, completion = turn_1_parts()
    scope = _scope("/v1/chat/completions", "", client_headers(raw))
    lanes = lane_tricks(loop)
    return [
        *lanes,
        common_case_trick(lanes[0].with_, _reply_key),
        memory_trick(),
        many_conversations_trick(),
        rerun_trick(),
        *remembered_tricks(),
        short_parse_trick(raw),
        body_read_trick(scope, raw),
        header_trick(scope),
        *reading_tricks(messages),
        tools_count_trick(req),
        tools_key_trick(req),
        scenario_trick(req.transcript.conversation(req.tools)),
        render_trick(completion),
        kept_message_trick(req),
        record_trick(completion, "completions.Completion"),
        record_trick(req, "chat.ChatRequest"),
        record_trick(req.transcript, "transcript.Transcript"),
        *header_tricks(),
        *shortcut_tricks(raw, req, completion, scope),
        started_without_task_trick(raw, scope["headers"], loop),
        answered_at_once_trick(raw, scope["headers"], loop),
        remembered_later_trick(loop),
    ]
