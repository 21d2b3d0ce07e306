"""The proxy app: each request forwarded to the upstream, its reply passed back byte for byte
and, when it is a model's reply, recorded.

Three modes: `record` forwards everything; `proxy-on-miss` answers a turn already recorded from
the recording (through the mock itself, in the request's own wire format) and forwards the
rest; `strict` answers only from the recording and refuses the rest with a 404 `not_recorded`.

What reaches the client is what the upstream sent: status, headers (less hop-by-hop ones) and
body bytes, streamed as they arrive. Recording reads beside the relay and never changes or cuts
it: a reply it cannot hold (an odd shape, too deep, too large, compressed) is passed on as it
came and skipped with a log line.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import ssl
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mockprovider.app import create_app
from mockprovider.errors import APIError
from mockprovider.journal import Journal, headers_of
from mockprovider.recorder.formats import (
    GEMINI_METHODS,
    PATHS,
    Asked,
    asked_of,
    error_in,
    stream_of,
    whole_reply,
)
from mockprovider.recorder.presence import GONE, while_present
from mockprovider.recorder.recording import Recording
from mockprovider.recorder.relay import close_both, read_up_to, rest
from mockprovider.recorder.replies import MAX_REPLY_BYTES, Format, NotRecordable, Stream
from mockprovider.recorder.upstream import Upstream, sent_path
from mockprovider.scripts.files import compile_scenario

Mode = Literal["record", "proxy-on-miss", "strict"]

MAX_BODY_BYTES = 16 * 1024 * 1024
UPSTREAM_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""A CPU model can take minutes per reply; a dead upstream should fail fast."""
HOP_BY_HOP = frozenset({
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
    "proxy-authorization", "proxy-connection",
})
_NOT_FORWARDED = HOP_BY_HOP | {"accept-encoding"}
OFF_LOOP_BYTES = 1024 * 1024
"""A whole reply larger than this is parsed and recorded on a worker thread."""
LOG_LINES = 1000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
"""What a log line shows as an escape: control characters, line separators, lone surrogates."""


@dataclass(kw_only=True)
class Recorder:
    """Everything one proxy holds: `app.state.recorder`."""

    upstream: Upstream
    recording: Recording
    mode: Mode
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    """The latest log lines, also written to stderr (the Python API reads them)."""
    journal: Journal | None = None
    """When set, every request the proxy receives, as the mock's journal keeps them."""
    misses: list[str] = field(default_factory=list)
    """In strict mode, each request the recording had no reply for (the pytest fixture fails
    the test with them)."""

    def log(self, line: str) -> None:
        # An upstream's words (a tool's name, an error) may carry terminal control sequences.
        line = _CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode(), self.upstream.scrub(line))
        self.lines.append(line)
        print(line, file=sys.stderr, flush=True)


def _forwarded(request: Request) -> list[tuple[bytes, bytes]]:
    """The client's headers as raw bytes (a value outside ASCII is valid HTTP, and httpx would
    refuse it as text), less hop-by-hop ones."""
    headers = [(k, v) for k, v in request.headers.raw
               if k.decode("latin-1").lower() not in _NOT_FORWARDED]
    headers.append((b"accept-encoding", b"identity"))  # bytes pass through as the upstream sent them
    return headers


def _returned(ours: Response, theirs: httpx.Response) -> Response:
    """`ours` with the upstream's headers as they came (repeated ones, such as set-cookie, kept
    apart), less hop-by-hop ones; the length stays ours, of the body we send, except for HEAD,
    whose length is the upstream's (of the body a GET would get)."""
    head = theirs.request.method == "HEAD"
    own = b"" if head else b"content-length"
    kept = [(k, v) for k, v in theirs.headers.raw
            if k.decode("latin-1").lower() not in HOP_BY_HOP or (head and k.lower() == b"content-length")]
    ours.raw_headers = [h for h in ours.raw_headers if h[0] == own] + kept
    return ours


async def _body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise APIError(413, f"Request body is larger than {MAX_BODY_BYTES} bytes.",
                           code="request_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _record(rec: Recorder, asked: Asked, read: Callable[[], dict[str, Any]]) -> None:
    """Record the reply `read` returns; whatever goes wrong is one log line, never the client's."""
    try:
        rec.log(rec.recording.add(asked.user, asked.turn, asked.model, read()))
    except NotRecordable as e:
        rec.log(f"not recorded: {e}")
    except Exception as e:  # noqa: BLE001 - the reply has reached the client; recording must not fail it
        rec.log(f"not recorded: the recorder failed on this reply ({type(e).__name__}: {e})")


async def exchange(request: Request, fmt: Format) -> Response:
    rec: Recorder = request.app.state.recorder
    raw = await _body(request)
    _journal(rec, request, raw)
    asked = asked_of(fmt, raw, request.path_params, betas=request.headers.get("anthropic-beta", ""))
    if isinstance(asked, Asked) and rec.mode != "record":
        reply = rec.recording.lookup(asked.user, asked.turn)
        if reply is not None:
            return await _replay(request, rec, fmt, raw, asked, reply)
    if rec.mode == "strict":
        where = f"turn {asked.turn} of {asked.user[:60]!r}" if isinstance(asked, Asked) else asked
        rec.misses.append(f"{request.method} {request.url.path}: {where}")
        return error_in(fmt, APIError(
            404, f"Nothing is recorded in {rec.recording.out} for this request ({where}); "
            "--strict answers only recorded turns.", code="not_recorded"))
    query = request.scope.get("query_string", b"")
    native = fmt in ("gemini", "ollama", "converse") or _azure(request.url.path)
    converse = fmt == "converse"  # its path as sent: an ARN's escaped '/' stays inside the model id
    path = sent_path(request.scope) if converse else request.url.path if native else PATHS[fmt]
    target = rec.upstream.target(path, query, from_root=native, encoded=converse)
    if target is None:
        return error_in(fmt, APIError(404, f"{request.url.path}: the path leaves the upstream's base path.",
                                    code="not_found"))
    forward = functools.partial(_forward, request, rec, target, raw, asked, fmt)
    return await while_present(request, rec.log, forward)


def _journal(rec: Recorder, request: Request, raw: bytes) -> None:
    if rec.journal is not None:
        rec.journal.record_raw(method=request.method, path=request.url.path,
                               headers=headers_of(request.headers.items()), raw=raw)


async def _replay(
    request: Request, rec: Recorder, fmt: Format, raw: bytes, asked: Asked, reply: dict[str, Any]
) -> Response:
    """The recorded reply, rendered by the mock itself in the request's wire format."""
    app = create_app()
    script = compile_scenario({"name": "recorded", "turns": [reply], "after_last": "repeat"},
                              source=str(rec.recording.out))
    name = asked.model.partition("+")[0]  # the mock reads options after a "+"
    app.state.config = dataclasses.replace(app.state.config, scenarios={name: script})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://recording") as mock:
        # The query too: Gemini streams as SSE only when asked (`?alt=sse`).
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response = await mock.post(path, content=raw, headers=_forwarded(request))
    rec.log(f"replayed turn {asked.turn} of {asked.user[:40]!r} from {rec.recording.out}")
    return _returned(Response(response.content, status_code=response.status_code), response)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every upstream request: building one loads the CA bundle, which
    costs more than a whole loopback exchange."""
    return httpx.create_ssl_context()


async def _send(rec: Recorder, request: Request, target: httpx.URL, raw: bytes
                ) -> tuple[httpx.AsyncClient, httpx.Response]:
    """The upstream's response, streaming; an `APIError` 502 (in the route's shape) if unreachable."""
    client = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT, verify=_tls())
    upstream = client.build_request(request.method, target, content=raw, headers=_forwarded(request))
    try:
        return client, await client.send(upstream, stream=True)
    except BaseException as e:
        with anyio.CancelScope(shield=True):  # cancelled (the client left) too
            await client.aclose()
        if not isinstance(e, httpx.HTTPError):
            raise
        why = f"{type(e).__name__}: {e}"
        message = rec.upstream.scrub(f"The upstream {rec.upstream.shown} could not be reached: {why}")
        raise APIError(502, message, type="server_error", code="upstream_unreachable") from None


async def _forward(
    request: Request, rec: Recorder, target: httpx.URL, raw: bytes, asked: Asked | str | None,
    fmt: Format | None,
) -> Response:
    client, response = await _send(rec, request, target, raw)
    try:
        return await _answer(request, rec, client, response, asked, fmt)
    except BaseException:  # cancelled: the client left before the reply was whole
        with anyio.CancelScope(shield=True):
            await close_both(response, client)
        raise


async def _answer(
    request: Request, rec: Recorder, client: httpx.AsyncClient, response: httpx.Response,
    asked: Asked | str | None, fmt: Format | None,
) -> Response:
    """The upstream's `response` relayed: streamed as it comes, or read whole and recorded."""
    status = response.status_code
    recordable = status == 200 and fmt is not None
    if recordable and isinstance(asked, str):
        rec.log(f"not recorded: {asked}")
    if recordable and response.headers.get("content-encoding", "identity") != "identity":
        rec.log(f"not recorded: the reply is {response.headers['content-encoding']}-encoded; passed through")
        recordable = False
    chunks = response.aiter_raw()
    close = BackgroundTask(close_both, response, client)
    media = response.headers.get("content-type", "").lower()  # media types ignore case
    if media.startswith(("text/event-stream", "application/x-ndjson", "application/vnd.amazon.eventstream")):
        stream = stream_of(fmt) if recordable and fmt is not None and isinstance(asked, Asked) else None
        relay = _relay(chunks, rec, stream, asked, close)
        return _returned(StreamingResponse(relay, status_code=status, background=close), response)
    try:
        head, ended = await read_up_to(chunks, response, MAX_REPLY_BYTES)
    except httpx.HTTPError as e:
        # Nothing has reached the client yet: a whole reply the upstream broke off is a 502, as
        # for an upstream that cannot be reached, not the framework's plain-text 500.
        await close_both(response, client)
        why = rec.upstream.scrub(f"{type(e).__name__}: {e}")
        rec.log(f"the upstream {rec.upstream.shown} failed before its reply was whole ({why}); a 502 sent")
        raise APIError(502, f"The upstream {rec.upstream.shown} failed before its reply was whole: {why}",
                       type="server_error", code="upstream_failed") from None
    if not ended:
        if recordable:
            rec.log(f"warning: a reply larger than {MAX_REPLY_BYTES} bytes (the limit of a scenario file) "
                    "was passed through and not recorded")
        passed = StreamingResponse(rest(head, chunks), status_code=status, background=close)
        return _returned(passed, response)
    await close_both(response, client)
    if recordable and isinstance(asked, Asked) and fmt is not None:
        read = functools.partial(whole_reply, fmt, head)
        if len(head) > OFF_LOOP_BYTES:  # parsing and saving it would stall every other exchange
            await anyio.to_thread.run_sync(_record, rec, asked, read)
        else:
            _record(rec, asked, read)
    return _returned(Response(head, status_code=status), response)


async def _relay(
    chunks: AsyncIterator[bytes], rec: Recorder, stream: Stream | None, asked: Asked | str | None,
    close: BackgroundTask,
) -> AsyncIterator[bytes]:
    ended = False
    warned = False
    left = False
    try:
        async for chunk in chunks:
            if stream is not None:
                stream.feed(chunk)  # never raises: an odd stream stops being read, not relayed
                if stream.oversize and not warned:
                    warned = True
                    rec.log(f"warning: a streamed reply passed {MAX_REPLY_BYTES} bytes (the limit of a "
                            "scenario file); it is passed through and not recorded")
            yield chunk
        ended = True
    except BaseException as e:
        left = not isinstance(e, Exception)  # cancelled, or closed: the client is gone
        raise
    finally:
        # Recorded before any await here: a client that hangs up once it has read the end (the
        # openai client does) cancels this generator at its next await. A reply cut off before
        # the stream said it was whole is not recorded.
        whole = stream is not None and (ended or stream.finished) and not stream.oversize
        if stream is not None and whole and isinstance(asked, Asked):
            _record(rec, asked, stream.reply)
        elif left and stream is not None:
            rec.log(GONE)
        with anyio.CancelScope(shield=True):  # a client gone mid-stream cancels us; close all the same
            await close()


async def passthrough(request: Request) -> Response:
    """Anything else under /v1 (e.g. GET /v1/models), forwarded and returned as is, unrecorded;
    a path whose dot segments leave the upstream's base path is refused."""
    return await _pass(request, request.path_params["path"], from_root=False)


async def passthrough_root(request: Request) -> Response:
    """Anything else of Gemini's, Ollama's and Azure's (`GET /api/tags`, a `countTokens`, Azure's
    embeddings), the same way, under the upstream's root; Bedrock's as the client sent it."""
    if request.url.path.startswith("/model/"):
        return await _pass(request, sent_path(request.scope), from_root=True, encoded=True)
    return await _pass(request, request.url.path, from_root=True)


async def _pass(request: Request, path: str, *, from_root: bool, encoded: bool = False) -> Response:
    rec: Recorder = request.app.state.recorder
    raw = await _body(request)
    _journal(rec, request, raw)
    if rec.mode == "strict":
        rec.misses.append(f"{request.method} {request.url.path}: not a model's reply, never recorded")
        raise APIError(
            404, f"{request.method} {request.url.path} is not recorded; --strict forwards nothing.",
                       code="not_recorded")
    target = rec.upstream.target(path, request.scope.get("query_string", b""), from_root=from_root,
                                 encoded=encoded)
    if target is None:
        raise APIError(404, f"{request.method} {request.url.path}: the path leaves the upstream's base path.",
                       code="not_found")
    forward = functools.partial(_forward, request, rec, target, raw, None, None)
    return await while_present(request, rec.log, forward)


async def gemini_method(request: Request) -> Response:
    """Gemini's model methods: generateContent and its stream recorded, any other passed on."""
    if request.path_params["method"] not in GEMINI_METHODS:
        return await passthrough_root(request)
    return await _route("gemini")(request)


def _azure(path: str) -> bool:
    """Azure OpenAI's routes: under the upstream's root (the resource's endpoint), as the client sent them."""
    return path.startswith("/openai/")


AZURE_ROUTES: tuple[tuple[str, Format], ...] = (
    ("/openai/deployments/{deployment}/chat/completions", "chat"),
    ("/openai/deployments/{deployment}/responses", "responses"),
    ("/openai/responses", "responses"),
    ("/openai/v1/chat/completions", "chat"),
    ("/openai/v1/responses", "responses"),
)
"""Azure OpenAI's model routes: the chat and responses formats, the deployment naming the model."""


def _route(fmt: Format) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            return await exchange(request, fmt)
        except APIError as e:
            return error_in(fmt, e)

    return endpoint


async def healthz(request: Request) -> Response:
    rec: Recorder = request.app.state.recorder
    return JSONResponse({"status": "ok", "recording": str(rec.recording.out), "mode": rec.mode})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.response()


_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def proxy_app(recorder: Recorder) -> Starlette:
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", _route("chat"), methods=["POST"]),
            Route("/v1/responses", _route("responses"), methods=["POST"]),
            Route("/v1/messages", _route("messages"), methods=["POST"]),
            *(Route(f"/{version}/models/{{model}}:{{method}}", gemini_method, methods=["POST"])
              for version in ("v1beta", "v1")),
            Route("/api/chat", _route("ollama"), methods=["POST"]),
            *(Route(path, _route(fmt), methods=["POST"]) for path, fmt in AZURE_ROUTES),
            *(Route(f"/model/{{model_id:path}}/{method}", _route("converse"), methods=["POST"])
              for method in ("converse", "converse-stream")),
            Route("/v1/{path:path}", passthrough, methods=_ANY),
            Route("/openai/{path:path}", passthrough_root, methods=_ANY),
            Route("/v1beta/{path:path}", passthrough_root, methods=_ANY),
            Route("/api/{path:path}", passthrough_root, methods=_ANY),
            Route("/model/{path:path}", passthrough_root, methods=_ANY),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        exception_handlers={APIError: _api_error},
    )
    app.state.recorder = recorder
    return app
