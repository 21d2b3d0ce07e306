"""The headers the real APIs put on every reply: a request id, the processing time, rate limits.

OpenAI's routes carry `x-request-id`, `openai-processing-ms` and `x-ratelimit-{limit,remaining,
reset}-{requests,tokens}`; Anthropic's route carries `request-id` (also in its error bodies, as
`request_id`) and `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`. The limits and
the remaining figures come from the `ratelimit=R:T` and `remaining=R:T` options; a stateless
server keeps no window, so by default nothing is used up and the reset is now; a 429 says
nothing is left, and when to retry (`retry-after`) unless it says so itself.

A middleware adds them as a reply starts, so every reply has them, errors and streams included.
The endpoint leaves the options it resolved in the ASGI scope (`OPTIONS`); a reply sent before
options were resolved (a malformed body, say) states the server's defaults.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import lru_cache
from random import getrandbits

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mockprovider.scripts.options import Options

REQUEST_ID = "mockprovider.request_id"
JSON_HEAD = "mockprovider.json_head"
"""A JSON chat reply's headers up to its length, left by the reply phase for `ChatLane`: as
header lines (`json_lines`) where the lane asked for them (`AS_LINES`), else as pairs (`json_head`)."""
AS_LINES = "mockprovider.head_as_lines"
"""Set by `ChatLane` when its server takes the reply whole (`cycle.takes_whole`), head rendered."""
OPTIONS = "mockprovider.options"
STARTED = "mockprovider.started"


def request_id(scope: Scope) -> str:
    """This request's id (as its reply's headers carry it)."""
    return scope.get(REQUEST_ID, "")


@lru_cache(maxsize=64)
def _openai_limits(limits: tuple[int, int], left: tuple[int, int]) -> tuple[tuple[bytes, bytes], ...]:
    """The rate-limit headers for these figures, built once (most replies state the defaults)."""
    return (
        (b"x-ratelimit-limit-requests", b"%d" % limits[0]), (b"x-ratelimit-limit-tokens", b"%d" % limits[1]),
        (b"x-ratelimit-remaining-requests", b"%d" % left[0]),
        (b"x-ratelimit-remaining-tokens", b"%d" % left[1]),
        (b"x-ratelimit-reset-requests", b"0s"), (b"x-ratelimit-reset-tokens", b"0s"),
    )


def _left(options: Options, limited: bool) -> tuple[int, int]:
    """The remaining requests and tokens: as the options script them; else nothing used up, or
    nothing left when the reply is a 429 (a client reading the headers then waits, not retries)."""
    return options.remaining or ((0, 0) if limited else options.ratelimit)


def openai_headers(
    options: Options, rid: str, started: float, limited: bool = False
) -> list[tuple[bytes, bytes]]:
    """An OpenAI reply's headers: its id, the time since `started`, `options`' rate limits
    (`limited`: the reply is a 429)."""
    ms = b"%d" % int((time.perf_counter() - started) * 1000)
    return [(b"x-request-id", rid.encode()), (b"openai-processing-ms", ms), *openai_limits(options, limited)]


def openai_limits(options: Options, limited: bool = False) -> tuple[tuple[bytes, bytes], ...]:
    """`options`' rate-limit headers, as `openai_headers` states them (`limited`: for a 429)."""
    return _openai_limits(options.ratelimit, _left(options, limited))


JSON_TYPE = (b"content-type", b"application/json")
LENGTH_AND_TYPE = b"content-length: %d\r\n" + b"%s: %s\r\n" % JSON_TYPE
"""The lines `json_lines` leaves to follow it, once the body's length is known (`% length`)."""
_KEPT: tuple[Options | None, tuple[tuple[bytes, bytes], ...], bytes] = (None, (), b"")
"""The last options' rate-limit headers, as pairs (`json_head`) and as header lines (`json_lines`):
nearly every reply states the server's defaults (results/bench.md, speed tricks: "the defaults'
header block kept")."""


def _keep(options: Options) -> tuple[Options | None, tuple[tuple[bytes, bytes], ...], bytes]:
    global _KEPT
    limits = openai_limits(options)
    _KEPT = (options, limits, b"".join([b"%s: %s\r\n" % header for header in limits]))
    return _KEPT


def _id_and_ms(scope: Scope) -> tuple[str, int]:
    """The request's id (given here unless a middleware gave one: `new_id` written in, as every
    chat reply comes here) and the milliseconds since `STARTED`."""
    rid = scope.get(REQUEST_ID)
    if rid is None:
        rid = scope[REQUEST_ID] = f"req_{getrandbits(96):024x}"
    return rid, int((time.perf_counter() - scope[STARTED]) * 1000)


def json_head(scope: Scope, options: Options) -> list[tuple[bytes, bytes]]:
    """A JSON chat reply's headers up to its length: the request's id, the time since `STARTED`,
    `options`' rate limits (`_KEPT`)."""
    rid, ms = _id_and_ms(scope)
    kept = _KEPT
    if kept[0] is not options:
        kept = _keep(options)
    return [(b"x-request-id", rid.encode()), (b"openai-processing-ms", b"%d" % ms), *kept[1]]


def json_lines(scope: Scope, options: Options) -> bytes:
    """`json_head`'s headers as header lines for `cycle.WHOLE` (every name and value here is the
    mock's own: valid as written), `LENGTH_AND_TYPE` to follow."""
    rid, ms = _id_and_ms(scope)
    kept = _KEPT
    if kept[0] is not options:
        kept = _keep(options)
    return b"x-request-id: %s\r\nopenai-processing-ms: %d\r\n%s" % (rid.encode(), ms, kept[2])


def new_id(scope: Scope) -> str:
    """Give the request its id, kept in the scope (unique, not secret)."""
    rid = scope[REQUEST_ID] = f"req_{getrandbits(96):024x}"
    return rid


def anthropic_headers(options: Options, rid: str, limited: bool = False) -> list[tuple[bytes, bytes]]:
    """An Anthropic reply's headers: its id and `options`' rate limits (`limited`: the reply is a 429)."""
    (req_limit, tok_limit), (req_left, tok_left) = options.ratelimit, _left(options, limited)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    return [
        (b"request-id", rid.encode()),
        (b"anthropic-ratelimit-requests-limit", b"%d" % req_limit),
        (b"anthropic-ratelimit-requests-remaining", b"%d" % req_left),
        (b"anthropic-ratelimit-requests-reset", now),
        (b"anthropic-ratelimit-tokens-limit", b"%d" % tok_limit),
        (b"anthropic-ratelimit-tokens-remaining", b"%d" % tok_left),
        (b"anthropic-ratelimit-tokens-reset", now),
    ]


def anthropic_path(path: str) -> bool:
    """Whether `path` is Anthropic's (Messages, or counting a Messages request's tokens)."""
    return path.endswith(("/messages", "/messages/count_tokens"))


def gemini_method(path: str) -> bool:
    """Whether `path` is a Gemini method call's, `…/models/{model}:{method}`."""
    return "/models/" in path and ":" in path.rpartition("/")[2]


def from_google_genai(scope: Scope) -> bool:
    """Whether google-genai sent the request (it names itself in `x-goog-api-client`): given only a
    base URL, it lists and describes models under /v1/, OpenAI's paths."""
    return any(name == b"x-goog-api-client" for name, _ in scope["headers"])


def _gemini(scope: Scope) -> bool:
    """A Gemini method call (`…/v1/models/{model}:{method}`), a path under Vertex AI's /v1/projects or
    /v1/publishers, or google-genai's listing at /v1/models:
    Google sends none of these headers."""
    path = scope["path"]
    if gemini_method(path) or "/v1/projects/" in path or "/v1/publishers/" in path:  # Vertex AI's
        return True
    return "/models" in path and from_google_genai(scope)


def start(scope: Scope) -> tuple[str, float]:
    """Give the request its id (kept in the scope) and start its processing clock."""
    rid = new_id(scope)
    started = scope[STARTED] = time.perf_counter()
    return rid, started


def of(scope: Scope, defaults: Options) -> list[tuple[bytes, bytes]]:
    """The headers `adding` adds, for a reply sent outside it: the server-error handler's, whose
    middleware sits outside every other (none if the request was given no id)."""
    rid = scope.get(REQUEST_ID)
    if rid is None or _gemini(scope):
        return []
    options = scope.get(OPTIONS) or defaults
    if anthropic_path(scope["path"]):
        return anthropic_headers(options, rid)
    return openai_headers(options, rid, scope.get(STARTED, time.perf_counter()))


def adding(scope: Scope, send: Send, defaults: Options, rid: str, started: float) -> Send:
    """`send`, with the real APIs' headers added to the reply's start."""
    anthropic = anthropic_path(scope["path"])

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            options = scope.get(OPTIONS) or defaults
            limited = message["status"] == 429
            extra = (anthropic_headers(options, rid, limited) if anthropic
                     else openai_headers(options, rid, started, limited))
            headers = list(message.get("headers", ()))
            # A reply's own header (a scripted 429's remaining-tokens: 0) wins over the
            # default; stating both would give clients "0, 30000000". Plain loops, not
            # comprehensions (results/bench.md, speed tricks: "plain loops adding the API's headers").
            names = set()
            for name, _ in headers:
                names.add(name.lower())
            for header in extra:
                if header[0] not in names:
                    headers.append(header)
            if limited and b"retry-after" not in names:  # the real APIs say when, on every 429
                headers.append((b"retry-after", b"1"))
            message["headers"] = headers
        await send(message)

    return send_with_headers


def _openai_shaped(path: str) -> bool:
    """Under /v1 (every surface but Gemini's and Ollama's), or Azure's /openai; never under
    Bedrock's /model/, whose model id may hold '/v1/' or end in '/messages'."""
    return ("/v1/" in path or path.startswith("/openai/")) and not _bedrock(path)


def routed(scope: Scope) -> str:
    """The path the router matches: the scope's, less its root path (a proxy's prefix, a Mount)."""
    path, root = scope["path"], scope.get("root_path")
    return path[len(root):] if root and path.startswith(root) else path


def _bedrock(path: str) -> bool:
    """Under Bedrock's `/model/`, with or without an `/o/{options}` prefix."""
    if path.startswith("/o/"):
        path = path[path.find("/", 3):]
    return path.startswith("/model/")


class ApiHeaders:
    """Middleware: the real APIs' headers on every reply under /v1 (and Azure's /openai)."""

    def __init__(self, app: ASGIApp, defaults: Options | None = None) -> None:
        self.app = app
        self.defaults = defaults or Options()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _openai_shaped(routed(scope)) or _gemini(scope):
            await self.app(scope, receive, send)
            return
        rid, started = start(scope)
        await self.app(scope, receive, adding(scope, send, self.defaults, rid, started))
