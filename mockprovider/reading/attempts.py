"""The attempt number of a request whose client sends none.

Faults are keyed by (turn, attempt), and the attempt is what the client says it is
(`x-stainless-retry-count`, `x-lab-attempt`). Google's and Ollama's clients send no count: to
them a retry is the same request sent again. For those routes the server counts identical
requests (same path, query and body) seen within `RECENT_S` seconds of the previous one, and
fills in `x-lab-attempt` as if the client had sent it, so `fault=429@1x2` means the same thing
in every format. A request answered without a fault is forgotten (`settle`): the same request
sent again is a new one, at attempt 0, as a fresh call of an OpenAI client says it is, so a
repeated run meets its faults again. The count picks only which injected fault answers; every
reply stays a pure function of the conversation. Each server process counts its own requests
(with several workers, a retry landing on another one starts at 0 there), and remembers at
most `MAX_ENTRIES` of them.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

from starlette.requests import Request

from mockprovider.reading.request_headers import header_map

RECENT_S = 120.0
"""A repeat within this many seconds of the last one is a retry (google-genai's longest default
backoff is 60 s)."""

MAX_ENTRIES = 4096
"""Requests remembered at most (a digest and two numbers each); the oldest go first."""

_SENT = (b"x-lab-attempt", b"x-stainless-retry-count")
_KEY = "mockprovider.attempt_key"


class Attempts:
    """How often each recent request was seen: digest -> (count, last seen)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[bytes, tuple[int, float]] = OrderedDict()

    def count(self, key: bytes, now: float) -> int:
        """0 the first time `key` is seen (or when its last sighting is stale), then 1, 2, …"""
        count, last = self._seen.pop(key, (0, now))
        attempt = count if now - last <= RECENT_S else 0
        self._seen[key] = (attempt + 1, now)
        while len(self._seen) > MAX_ENTRIES:
            self._seen.popitem(last=False)
        return attempt

    def forget(self, key: bytes) -> None:
        self._seen.pop(key, None)


def fill_in(request: Request, raw: bytes) -> None:
    """Give `request` the attempt header its client did not send: how often it came before."""
    headers = header_map(request)
    if any(name in headers for name in _SENT):
        return
    state = request.app.state
    attempts = getattr(state, "attempts", None)
    if attempts is None:
        attempts = state.attempts = Attempts()
    digest = hashlib.sha256(request.url.path.encode() + b"?" + request.url.query.encode() + b"\n" + raw)
    key = request.scope[_KEY] = digest.digest()
    headers[b"x-lab-attempt"] = str(attempts.count(key, time.monotonic())).encode()


def settle(request: Request) -> None:
    """`request` was answered without a fault: the same request sent again starts at attempt 0."""
    key = request.scope.get(_KEY)
    if key is not None:
        request.app.state.attempts.forget(key)
