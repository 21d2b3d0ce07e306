"""Each lever of the harness's per-turn cost beside the plain code it replaced: same input, same
output (checked), timed round by round, interleaved, as the mock's speed tricks are
(`experiments.bench.tricks`). A lever's row says what one use costs with and without it and
what it saves per turn of `runaway` (its uses per turn times the difference); `make bench` puts
the rows on results/bench.md, and `make bench-check` fails if one stops saving anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from experiments.bench.tricks import Batch, Trick, measure, repeat
from harness import ModelClient, new_run
from harness.body import Bodies
from harness.cancel import Cancel, Cancelled
from harness.chapter import SYSTEM
from harness.codec import _field_names, dumps
from harness.state import ToolRun
from harness.store import sql
from harness.store.rows import APPEND_ONLY
from harness.usage import Usage


@dataclass(frozen=True, kw_only=True)
class Lever:
    trick: Trick
    uses: int
    """Times one turn of `runaway` (a model call, a `list_files` call, one save) uses it."""
    close: Callable[[], object] = lambda: None
    """Releases what the two sides hold (a database's connections)."""


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


@contextmanager
def _one_row_per_statement() -> Iterator[None]:
    """The store's save as it was: the layout read first, each item row its own statement."""
    kept_write, kept_fence = sql.SqlStore._write, sql.SqlStore._fence

    def fence(self: sql.SqlStore, tx: sql.Tx, run_id: str) -> int:
        self._check_schema(tx)
        return kept_fence(self, tx, run_id)

    def write(self: sql.SqlStore, tx: sql.Tx, state: Any, delta: Any, epoch: int) -> None:
        if delta.rewrite:  # a run's first save: the same either way
            return kept_write(self, tx, state, delta, epoch)
        rows = [(state.run_id, f, start + i, body) for f in APPEND_ONLY
                for start, bodies in [delta.items[f]] for i, body in enumerate(bodies)]
        tx.executemany("INSERT INTO run_items (run_id, field, seq, body) VALUES (?, ?, ?, ?)", rows)
        delta.items = {f: (start, []) for f, (start, _) in delta.items.items()}
        kept_write(self, tx, state, delta, epoch)

    sql.SqlStore._write, sql.SqlStore._fence = write, fence  # type: ignore[method-assign]
    try:
        yield
    finally:
        sql.SqlStore._write, sql.SqlStore._fence = kept_write, kept_fence  # type: ignore[method-assign]


def _saves(store: Any, plain: bool) -> Batch:
    """n saves of a new run that grows by one `runaway` turn before each; the output reads the run
    back (`_loaded`: the same on both sides)."""
    runs = itertools.count()

    def batch(n: int) -> Callable[[], Any]:
        state = new_run("Which file mentions a timeout?", system=SYSTEM, run_id=f"lever-{next(runs)}")

        def go() -> Any:
            with _one_row_per_statement() if plain else contextlib.nullcontext():
                for _ in range(n):
                    k = state.turns
                    call, result, usage, tool_run = _turn_items()
                    call["tool_calls"][0]["id"] = result["tool_call_id"] = f"call_{k}"
                    state.messages += [call, result]
                    state.turn_usage.append(usage)
                    state.tool_runs.append(dataclasses.replace(tool_run, call_id=f"call_{k}"))
                    state.turns += 1
                    store.save(state)
            return functools.partial(store.load, state.run_id)  # read back outside the timing
        return go
    return batch


def _loaded(load: Callable[[], Any]) -> Any:
    state = load()
    return (len(state.messages), state.turns, state.messages[-1])


def _in_transactions(store: Any) -> Any:
    """`store` saving every run in a transaction of several statements, never in one statement
    (`PostgresStore._append`): as a save that opens or closes an intent still is."""
    store._append = lambda state: False
    return store


def save_lever(url: str) -> Lever:
    """A PostgreSQL save's new item rows in one INSERT and the table layout checked by the head's
    own write, against a statement per row (psycopg's `executemany`) and a read of the layout
    first: two round trips fewer per save, in the same database (`url`). Both sides save in a
    transaction of several statements, as a save that opens or closes an intent does."""
    from harness.store.postgres import PostgresStore

    stores = _in_transactions(PostgresStore(url)), _in_transactions(PostgresStore(url))
    return Lever(uses=1, close=lambda: [s.close() for s in stores], trick=Trick(
        name="a save's rows in one INSERT, the layout checked by its write (PostgreSQL)",
        where="sql.SqlStore._write", turn=1, with_=_saves(stores[0], False),
        without=_saves(stores[1], True), key=_loaded, batch=10))


def append_lever(url: str) -> Lever:
    """A PostgreSQL save that only appends (every save of a read-only turn) as one statement, a
    transaction of its own (one round trip), against the same save as a transaction of several
    statements (BEGIN, the lease read, the rows, the head, COMMIT: five), in the same database."""
    from harness.store.postgres import PostgresStore

    stores = PostgresStore(url), _in_transactions(PostgresStore(url))
    return Lever(uses=1, close=lambda: [s.close() for s in stores], trick=Trick(
        name="a save that only appends as one statement (PostgreSQL)",
        where="PostgresStore._append", turn=1, with_=_saves(stores[0], False),
        without=_saves(stores[1], False), key=_loaded, batch=10))


BODY_TURNS = 50
"""Turns a transcript holds before the body lever's first use; each use adds one (a batch of 100
spans turns 50 to 150)."""


def _growing_bodies(encoder: Callable[[], Callable[[list[Any]], bytes]]) -> Batch:
    """n request bodies of a `runaway` transcript that grows by one turn before each, each batch
    with an encoder of its own."""
    def batch(n: int) -> Callable[[], Any]:
        turns = [_turn_items()[:2] for _ in range(BODY_TURNS + n)]
        start = new_run("Which file mentions a timeout?", system=SYSTEM).messages
        encode = encoder()

        def go() -> Any:
            messages = start + [m for turn in turns[:BODY_TURNS] for m in turn]
            for turn in turns[BODY_TURNS:]:
                messages += turn
                out = encode(messages)
            return out
        return go
    return batch


def body_lever() -> Lever:
    """`body.Bodies`: a request body joined from each message's JSON, kept since it was first
    sent, so a turn encodes only what it added; plainly, the whole body encoded every turn
    (`json.dumps`, as httpx's `json=` does). The bytes are the same."""
    def kept() -> Callable[[list[Any]], bytes]:
        return functools.partial(Bodies().body, "runaway", tools=_LEVER_TOOLS, max_tokens=None)

    def whole(messages: list[Any]) -> bytes:
        body = {"model": "runaway", "messages": messages, "tools": _LEVER_TOOLS}
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")

    return Lever(uses=1, trick=Trick(
        name="a request body from the messages' JSON kept since first sent", where="body.Bodies", turn=100,
        with_=_growing_bodies(kept), without=_growing_bodies(lambda: whole), batch=100))


_LEVER_TOOLS = [{"type": "function", "function": {"name": "list_files", "description": "List the files.",
                                                  "parameters": {"type": "object", "properties": {}}}}]
_REPLY = b'{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],' \
         b'"usage":{"prompt_tokens":10,"completion_tokens":1,"total_tokens":11}}'


def _posts(lean: bool) -> Batch:
    """n requests of one body through a `ModelClient`'s send, over a transport that answers at
    once (so only the client's own machinery is timed); the output is the last reply's body."""
    def batch(n: int) -> Callable[[], Any]:
        def go() -> Any:
            async def many() -> bytes:
                transport = httpx.MockTransport(lambda _: httpx.Response(200, content=_REPLY))
                async with ModelClient("http://model.test/v1", api_key="sk-lever", transport=transport) as c:
                    body = c._bodies.body("runaway", [{"role": "user", "content": "x"}], _LEVER_TOOLS, None)
                    for attempt in range(n):
                        if lean:
                            reply = await c._send(body, attempt, {})
                        else:
                            reply = await c._http.post(c._url, content=body, headers={
                                "x-lab-attempt": str(attempt), "content-type": "application/json"})
                return reply.content
            return asyncio.run(many())
        return go
    return batch


def send_lever() -> Lever:
    """`ModelClient._send`: a request built whole and handed to the transport, against
    `AsyncClient.post` (request merging, auth flow, redirect check, cookie parsing), both over a
    transport that answers at once."""
    return Lever(uses=1, trick=Trick(
        name="a request handed straight to the transport", where="ModelClient._send", turn=1,
        with_=_posts(True), without=_posts(False), batch=200))


class _Answering(asyncio.Protocol):
    """A server that answers every request with `_REPLY` at once: on the client's own event loop,
    so a lever's time is the client's and the sockets' (requests end with their Content-Length body)."""

    def __init__(self, opened: list[asyncio.BaseTransport]) -> None:
        self.opened = opened

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.buffer = transport, b""
        self.opened.append(transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = int(self.buffer[:end].lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"  # type: ignore[attr-defined]
                                 b"content-length: %d\r\n\r\n%s" % (len(_REPLY), _REPLY))


def _over_loopback(ours: bool) -> Batch:
    """n requests of one body through a `ModelClient`'s send to `_Answering` on a loopback port,
    the connection made before the timing; `ours`: over `http1.Origin`, else over httpx's
    transport (httpcore). The output is the last reply's status and body."""
    def batch(n: int) -> Callable[[], Any]:
        loop = asyncio.new_event_loop()

        opened: list[asyncio.BaseTransport] = []

        async def prepared() -> tuple[Any, ModelClient, bytes]:
            server = await loop.create_server(lambda: _Answering(opened), "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
            client = ModelClient(url, api_key="sk-lever",
                                 transport=None if ours else httpx.AsyncHTTPTransport())
            body = client._bodies.body("runaway", [{"role": "user", "content": "x"}], _LEVER_TOOLS, None)
            await client._send(body, 0, {})
            return server, client, body

        server, client, body = loop.run_until_complete(prepared())

        async def many() -> tuple[int, bytes]:
            try:
                for attempt in range(n):
                    reply = await client._send(body, attempt, {})
                return reply.status_code, reply.content
            finally:
                await client.aclose()
                server.close()
                for transport in opened:
                    transport.close()
                await asyncio.sleep(0)  # their sockets close on the loop's next turn

        def go() -> Any:
            try:
                return loop.run_until_complete(many())
            finally:
                loop.close()
        return go
    return batch


def connection_lever() -> Lever:
    """`http1.Origin`: a plain-http provider's requests over our own keep-alive connections (an
    asyncio protocol, httptools' parser), against httpx's transport (httpcore, h11, anyio), both
    from `ModelClient._send` to a server on loopback that answers at once."""
    return Lever(uses=1, trick=Trick(
        name="a request over our own keep-alive connection", where="http1.Origin", turn=1,
        with_=_over_loopback(True), without=_over_loopback(False), batch=100))


TEXT_ARRAYS = "SELECT ?, f, s, b FROM unnest(?::text[], ?::integer[], ?::text[]) AS t(f, s, b)"
"""The item rows as three arrays, sent as text (psycopg's `%s`)."""


def _text_arrays(store: Any) -> Any:
    """`store`'s one-statement save with its item rows sent as three text arrays (`TEXT_ARRAYS`):
    psycopg's array dumpers walk every value in Python, and escape every quote of every JSON body."""
    from harness.store import postgres

    names = ("_APPEND_CLAIMED", "_APPEND_UNCLAIMED", "_item_params")
    plain = [getattr(postgres, n).replace(postgres._pg(postgres.ITEMS), postgres._pg(TEXT_ARRAYS))
             for n in names[:2]] + [lambda rows: tuple([row[i] for row in rows] for i in range(3))]
    kept = store._append

    def append(state: Any) -> bool:
        saved = [getattr(postgres, n) for n in names]
        for n, value in zip(names, plain, strict=True):
            setattr(postgres, n, value)
        try:
            return kept(state)
        finally:
            for n, value in zip(names, saved, strict=True):
                setattr(postgres, n, value)

    store._append = append
    return store


def json_rows_lever(url: str) -> Lever:
    """A PostgreSQL one-statement save's item rows sent as one JSON document (`postgres.ITEMS`),
    against three text arrays (`TEXT_ARRAYS`), in the same database."""
    from harness.store.postgres import PostgresStore

    stores = PostgresStore(url), _text_arrays(PostgresStore(url))
    return Lever(uses=1, close=lambda: [s.close() for s in stores], trick=Trick(
        name="a one-statement save's item rows sent as one JSON document (PostgreSQL)",
        where="postgres._item_params", turn=1, with_=_saves(stores[0], False),
        without=_saves(stores[1], False), key=_loaded, batch=10))


def levers(postgres: str | None = None) -> list[Lever]:
    """Every lever; the PostgreSQL ones only given a database URL (`make bench` gives the test
    server's; `make bench-check` times the in-process ones)."""
    chosen = [cancel_lever(), encoder_lever(), body_lever(), send_lever(), connection_lever()]
    if not postgres:
        return chosen
    return [*chosen, save_lever(postgres), append_lever(postgres), json_rows_lever(postgres)]


def lever_rows(chosen: list[Lever], *, rounds: int) -> list[LeverRow]:
    rows = []
    for lever in chosen:
        try:
            with_us, without_us, ratio = measure(lever.trick, rounds=rounds)
        finally:
            lever.close()
        rows.append(LeverRow(lever=lever.trick.name, where=lever.trick.where, with_us=with_us,
                             without_us=without_us, ratio=ratio,
                             saved_per_turn_us=(without_us - with_us) * lever.uses, rounds=rounds))
    return rows
