"""The attempt number of a request whose client sends none, or whose number says nothing.

Faults are keyed by (turn, attempt), and the attempt is what the client says it is
(`x-lab-attempt`, else `x-stainless-retry-count`). Google's and Ollama's clients send no count: to
them a retry is the same request sent again. For those routes the server counts identical
requests (same path, query and body) seen within `RECENT_S` seconds of the previous one, and
fills in `x-lab-attempt` as if the client had sent it, so `fault=429@1x2` means the same thing
in every format. The `attempt=seen` option counts them for every route, whatever the client's
headers say: an agent's own retry after a stream cut mid-way is a fresh SDK call, numbered 0.

A request answered without a fault is forgotten (`settle`): the same request sent again is a new
one, at attempt 0, as a fresh call of an OpenAI client says it is, so a repeated run meets its
faults again. The count picks only which injected fault answers; every reply stays a pure
function of the conversation. Each server process counts its own requests (with several
workers, a retry landing on another one starts at 0 there).

Counts are kept per client, its address and its test id (`x-test-id`), so that one client's
requests cannot push another's counts out: each client keeps at most `MAX_ENTRIES` requests,
an address at most `MAX_TESTS` test ids, the process at most `MAX_CLIENTS` clients; past each
bound the least recently seen go first, and a new test id at a full address takes the place of
that address's own oldest.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

from starlette.requests import Request

from mockprovider.reading.request_headers import header_map, test_id

RECENT_S = 120.0
"""A repeat within this many seconds of the last one is a retry (google-genai's longest default
backoff is 60 s)."""

MAX_ENTRIES = 1024
"""Requests remembered per client (a digest and two numbers each); its oldest go first."""
MAX_TESTS = 16
"""Test ids remembered per address."""
MAX_CLIENTS = 64
"""Clients remembered in all: with the bounds above, at most some 65,000 requests."""

Client = tuple[str, str]
"""(address, test id or ""): whose counts a request's count is among."""

SENT = (b"x-lab-attempt", b"x-stainless-retry-count")
"""Where a client says which attempt a request is, the first that holds one winning."""
_KEY = "mockprovider.attempt_key"
_COUNTED = "mockprovider.attempt_counted"
_RAW = "mockprovider.raw"


class Attempts:
    """How often each recent request of each client was seen: digest -> (count, last seen)."""

    def __init__(self) -> None:
        self._clients: OrderedDict[Client, OrderedDict[bytes, tuple[int, float]]] = OrderedDict()
        self._lock = threading.Lock()  # a large request is counted on another thread (`off_loop`)

    def count(self, client: Client, key: bytes, now: float) -> int:
        """0 the first time `client` sends `key` (or when its last sighting is stale), then 1, 2, …"""
        with self._lock:
            seen = self._seen_by(client)
            count, last = seen.pop(key, (0, now))
            attempt = count if now - last <= RECENT_S else 0
            seen[key] = (attempt + 1, now)
            while len(seen) > MAX_ENTRIES:
                seen.popitem(last=False)
            return attempt

    def forget(self, client: Client, key: bytes) -> None:
        with self._lock:
            seen = self._clients.get(client)
            if seen is not None:
                seen.pop(key, None)

    def _seen_by(self, client: Client) -> OrderedDict[bytes, tuple[int, float]]:
        seen = self._clients.pop(client, None)
        if seen is None:
            seen = OrderedDict()
            same_address = [c for c in self._clients if c[0] == client[0]]
            if len(same_address) >= MAX_TESTS:
                del self._clients[same_address[0]]  # its own least recently seen test
            elif len(self._clients) >= MAX_CLIENTS:
                self._clients.popitem(last=False)
        self._clients[client] = seen  # the most recently seen last
        return seen


def keep_body(request: Request, raw: bytes) -> None:
    """Hold the request's body for `counted` (a reference, not a copy)."""
    request.scope[_RAW] = raw


def counted(request: Request) -> int:
    """How often this client sent this same request lately (path, query and body); counted once
    per request, however many steps ask."""
    scope = request.scope
    if _COUNTED not in scope:
        raw = scope.get(_RAW, b"")
        digest = hashlib.sha256(request.url.path.encode() + b"?" + request.url.query.encode() + b"\n" + raw)
        scope[_KEY] = digest.digest()
        scope[_COUNTED] = _attempts(request).count(_client(request), scope[_KEY], time.monotonic())
    return scope[_COUNTED]


def fill_in(request: Request, raw: bytes) -> None:
    """Give `request` the attempt header its client did not send: how often it came before."""
    headers = header_map(request)
    if any(name in headers for name in SENT):
        return
    keep_body(request, raw)
    headers[b"x-lab-attempt"] = str(counted(request)).encode()  # type: ignore[index]


def settle(request: Request) -> None:
    """`request` was answered without a fault: the same request sent again starts at attempt 0."""
    key = request.scope.get(_KEY)
    if key is not None:
        _attempts(request).forget(_client(request), key)


def _client(request: Request) -> Client:
    return (request.client.host if request.client else "", test_id(request) or "")


def _attempts(request: Request) -> Attempts:
    state = request.app.state
    attempts = getattr(state, "attempts", None)
    if attempts is None:
        attempts = state.attempts = Attempts()
    return attempts
