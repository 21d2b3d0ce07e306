"""The mock's HTTP/1.1 protocol: uvicorn's httptools protocol, each request served by the mock's
own request cycle (`cycle.Cycle`: a reply in one write).

`Http11` is uvicorn's `HttpToolsProtocol`; the connection's own behaviour (parsing, errors, flow
control, shutdown) is uvicorn's. It calls uvicorn's proxy-headers middleware only for a request
that carries `x-forwarded-for` or `x-forwarded-proto` (without them that middleware does
nothing), and keeps the keep-alive timeout with one timer per timeout rather than one per
request, also for a connection whose request body ended after its reply (under uvicorn's
protocol such a connection never times out). The mock serves with it whenever it would serve
with httptools (`--http auto`); `--http httptools` keeps uvicorn's.

A request the app says may start without a task (`cycle.STARTS_WITHOUT_TASK`) is run at once,
once the bytes that came with its head are all parsed, in a copy of the connection's context as a
task would be; a task is made for it only if it waits, and goes on from where it waited
(`Resumed`). uvicorn makes and schedules a task for every request. Ahead of running it, the app
may answer such a request there and then, with no coroutine at all (`cycle.ANSWERS_AT_ONCE`), once its
body is all here: a head that came alone may be held for it (`Http11.held`).
"""

from __future__ import annotations

import asyncio
import contextvars
import urllib.parse
from collections.abc import Coroutine
from typing import Any

import httptools
from uvicorn.logging import TRACE_LOG_LEVEL
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT, service_unavailable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mockprovider.cycle import Cycle, check_headers, starts_without_task

_FORWARDED = frozenset({b"x-forwarded-for", b"x-forwarded-proto"})
_FRAMING = frozenset({b"connection", b"content-length", b"transfer-encoding"})


class Http11(HttpToolsProtocol):
    """uvicorn's httptools protocol, each request served by a `Cycle`."""

    cycle: Cycle  # type: ignore[assignment]
    forwarded = False
    """Whether this request carries `x-forwarded-for` or `x-forwarded-proto`: only then does
    uvicorn's proxy-headers middleware, a no-op without them, get called."""
    _defaults: tuple[list[tuple[bytes, bytes]] | None, bytes | None] = (None, None)
    feeding = False
    """Whether `data_received` is parsing: a request it may start without a task waits in `starting`
    until every byte that came with it is parsed (its body, most often, whole)."""
    starting: tuple[Cycle, Any] | None = None
    held: tuple[Cycle, Any] | None = None
    """A request held, not yet run, until its body has come: one the app may answer at once
    (`cycle.ANSWERS_AT_ONCE`) whose head came without its body (a client that writes the two
    apart, as the official clients do), with a short body declared (`Cycle.may_answer_at_once`).
    The chat lane would only wait for that body; if the connection goes first, the lane is given
    the request, and drops it as any whose client left."""

    def default_head(self) -> bytes | None:
        """The server's own header lines (`date`, `server`), rendered once per list (the server
        replaces the list when the date changes); None if they say anything about the framing
        (`connection`, `content-length`, `transfer-encoding`: configured by hand): no reply is
        then sent whole (`cycle.takes_whole`)."""
        listed, lines = self._defaults
        defaults = self.server_state.default_headers
        if listed is not defaults:
            check_headers(defaults)
            lines = None if any(name.lower() in _FRAMING for name, _ in defaults) else b"".join(
                [b"%s: %s\r\n" % (name.lower(), value) for name, value in defaults])
            self._defaults = (defaults, lines)
        return lines

    def data_received(self, data: bytes) -> None:
        # uvicorn's, with `feeding` noted and the request held in `starting` run at the end.
        self.idle_since = None  # busy (`_unset_keepalive_if_required`)
        self.feeding = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._run_held()
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
        except httptools.HttpParserUpgrade:
            self._run_held()
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        finally:
            self.feeding = False
        starting = self.starting
        if starting is None and (held := self.held) is not None and not held[0].more_body:
            starting, self.held = held, None  # its body came in these bytes
        if starting is not None:
            self.starting = None
            cycle, app = starting
            if cycle.answered_at_once(app):
                return
            if cycle.more_body and cycle.may_answer_at_once(app):
                self.held = starting  # the head came alone: the body follows, most often at once
                return
            # Called from a task (a test's harness): a step of the request in that task would
            # have `in_task` find a task, not its own.
            if asyncio.current_task(self.loop) is None:
                self._run_now(*starting)
            else:
                self._run(*starting)

    def _run_held(self) -> None:
        """The request held in `starting` given its task, as uvicorn gave it one, before what
        follows its bytes (a 400 that closes the connection, an upgrade) is answered."""
        starting, self.starting = self.starting, None
        if starting is not None:
            self._run(*starting)

    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.scope = {  # type: ignore[typeddict-item]
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,  # type: ignore[typeddict-item]
            "root_path": self.root_path,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }
        self.forwarded = False
        self.idle_since = None  # busy: a late body's end just before, in the same bytes, noted it idle

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        value = value.rstrip(b" \t")  # trailing whitespace is not part of a value (RFC 9110, 5.5)
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        elif name in _FORWARDED:
            self.forwarded = True
        self.headers.append((name, value))

    def shutdown(self) -> None:
        held, self.held = self.held, None
        if held is not None:  # the lane waits for its body, as for any, until the server stops it
            self._run(*held)
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        if self.logger.level <= TRACE_LOG_LEVEL:
            prefix = "{}:{} - ".format(*self.client) if self.client else ""
            self.logger.log(TRACE_LOG_LEVEL, "%sHTTP connection lost", prefix)
        cycle = self.cycle
        if cycle is not None:
            if not cycle.response_complete:
                cycle.disconnected = True
            cycle.wake()
        held, self.held = self.held, None
        if held is not None:  # its body will never come: the lane drops it, as any request whose client left
            self._run(*held)
        if self.flow is not None:
            self.flow.resume_writing()
        if exc is None:
            self.transport.close()
            timer, self.timeout_keep_alive_task = self.timeout_keep_alive_task, None
            if timer is not None:
                timer.cancel()
        self.parser = None  # type: ignore[assignment]

    # The keep-alive timeout, kept lazily: uvicorn arms a timer when a reply completes and cancels
    # it when the next request's bytes come, a timer made and dropped per request. Here a reply
    # notes when the connection went idle and one timer per timeout checks that note, closing
    # the connection if it stayed idle that long, else waiting again for the rest.
    idle_since: float | None = None
    """When the connection last went idle (its reply complete, nothing more in); None while busy."""

    def _unset_keepalive_if_required(self) -> None:
        self.idle_since = None

    def on_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            self.idle_since = None
            cycle, app = self.pipeline.pop()
            self._run(cycle, app)  # type: ignore[arg-type]
        else:
            self._went_idle()

    def _went_idle(self) -> None:
        self.idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self._idle_check)

    def _idle_check(self) -> None:
        self.timeout_keep_alive_task = None
        since = self.idle_since
        if since is None:  # busy: its reply notes the next idle time and arms the timer again
            return
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:  # at least a millisecond: uvloop runs a shorter delay at once, on a clock not yet moved
            self.timeout_keep_alive_task = self.loop.call_later(max(left, 1e-3), self._idle_check)
        else:
            self.timeout_keep_alive_handler()

    def on_headers_complete(self) -> None:
        parser = self.parser
        http_version = parser.get_http_version()
        scope = self.scope
        scope["method"] = parser.get_method().decode("ascii")
        if http_version != "1.1":
            scope["http_version"] = http_version
        if parser.should_upgrade() and self._should_upgrade():
            return
        parsed_url = httptools.parse_url(self.url)
        raw_path = parsed_url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        root_path = self.root_path
        scope["path"] = root_path + path if root_path else path
        scope["raw_path"] = root_path.encode("ascii") + raw_path if root_path else raw_path
        scope["query_string"] = parsed_url.query or b""
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")
        elif self.forwarded:
            app = self.app
        else:
            # uvicorn's own class only: a subclass may act on other headers.
            app = self.app.app if type(self.app) is ProxyHeadersMiddleware else self.app
        existing = self.cycle
        self.cycle = Cycle(self, scope, keep_alive=http_version != "1.0" and parser.should_keep_alive(),
                           expect_100_continue=self.expect_100_continue)
        if existing is None or existing.response_complete:
            if self.feeding and starts_without_task(app, scope):
                self.starting = (self.cycle, app)
            else:
                self._run(self.cycle, app)
        else:  # pipelined: it waits for the reply before it
            self.flow.pause_reading()
            self.pipeline.appendleft((self.cycle, app))  # type: ignore[arg-type]

    def _run(self, cycle: Cycle, app: Any) -> None:
        self._in_task(cycle.run_asgi(app), self._context())

    def _run_now(self, cycle: Cycle, app: Any) -> None:
        """`_run`, its first steps run here and now: a task is made only if it waits."""
        context = self._context()
        request = cycle.run_asgi(app)
        try:
            waiting = context.run(request.send, None)
        except StopIteration:
            return
        self._in_task(Resumed(request, waiting), context)

    def _context(self) -> contextvars.Context:
        """What a request runs in: a copy of the connection's context, as a task's own would be,
        or a new one with uvicorn's `reset_contextvars`."""
        if getattr(self.config, "reset_contextvars", False):
            return contextvars.Context()
        return contextvars.copy_context()

    def _in_task(self, request: Any, context: contextvars.Context) -> None:
        """`request` run in one of the server's tasks (waited for, then cancelled, at shutdown)."""
        task = self.loop.create_task(request, context=context)
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
            return
        cycle.body += body
        if len(cycle.body) > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.wake()

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if self.parser.should_upgrade() and self._should_upgrade():
            return
        if cycle.response_complete:
            # The app answered before the body ended (a refusal, say): its bytes, coming after the
            # reply, cleared the idle note, so it is taken again here, where the connection goes
            # idle. uvicorn arms no timer then: such a connection would never time out.
            if not self.transport.is_closing():  # nothing is queued behind a complete reply
                self._went_idle()
            return
        cycle.more_body = False
        cycle.wake()


class Resumed:
    """`coroutine`, run until it yielded `waiting` (what a task waits on: a future, or None for a
    turn of the loop), as a coroutine for a task to go on with: its first step yields `waiting`
    again, for the task to wait on; every later value, exception (a cancellation, with its
    message) and `close` goes straight to `coroutine`, as to a task's own; one cancelled before
    its first step is cancelled where it waits. Only a task drives it (registered as a
    `Coroutine` for `create_task`, it is never awaited)."""

    __slots__ = ("coroutine", "waiting")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self.coroutine = coroutine
        self.waiting: Any = [waiting]
        """What it waits on, in a list until the task has taken it; None after."""

    def send(self, value: Any) -> Any:
        waiting = self.waiting
        if waiting is not None:
            self.waiting = None
            return waiting[0]
        return self.coroutine.send(value)

    def throw(self, *exc: Any) -> Any:
        waiting, self.waiting = self.waiting, None
        if waiting is not None and asyncio.isfuture(waiting[0]):
            waiting[0].cancel()  # before its first step: what it waits on goes, as a task's does
        return self.coroutine.throw(*exc)

    def close(self) -> None:
        self.waiting = None
        self.coroutine.close()

    @property
    def cr_frame(self) -> Any:  # where a task's stack and repr look
        return getattr(self.coroutine, "cr_frame", None)

    @property
    def __name__(self) -> str:  # (what a task's repr names)
        return getattr(self.coroutine, "__qualname__", type(self).__name__)


Coroutine.register(Resumed)


def http_protocol(choice: str = "auto") -> str | type[asyncio.Protocol]:
    """uvicorn's `http` setting for a `--http` choice: `auto` is `Http11`; `httptools` and `h11`
    are uvicorn's own protocols of those names."""
    return Http11 if choice == "auto" else choice
