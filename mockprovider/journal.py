"""The request journal: the last N requests this server process received, for tests to inspect.

Off by default (`--journal N` turns it on). It observes and never steers: no scenario reads it,
so the mock stays stateless in everything it answers. It is per process — behind several
workers each keeps its own — and bounded: the oldest entries drop out, and each body is
already capped by the server's body limit and kept as compact JSON, so it holds about N × that
many bytes (more only for non-ASCII text, escaped).

`GET /journal` serves it as JSON (behind the API key when one is set), with credential headers
masked; in-process (the pytest fixture) the entries are the values themselves.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_CAPACITY = 100_000
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One request as the server received it."""

    seq: int
    """Counts from 0 over the process's life; a gap before the first entry means entries dropped out."""
    method: str
    path: str
    headers: Mapping[str, str]
    """Lower-cased names, as sent (repeated headers joined with ', ')."""
    compact: bytes
    """The body as compact ASCII JSON: parsed, it would take some twenty times the memory."""

    @property
    def body(self) -> Any:
        """The parsed JSON body (a fresh copy each time)."""
        return json.loads(self.compact)

    def _about(self, *, mask_secrets: bool) -> dict[str, Any]:
        headers = {
            name: ("<redacted>" if mask_secrets and name in SECRET_HEADERS else value)
            for name, value in self.headers.items()
        }
        return {"seq": self.seq, "method": self.method, "path": self.path, "headers": headers}

    def to_json(self, *, mask_secrets: bool = True) -> dict[str, Any]:
        return {**self._about(mask_secrets=mask_secrets), "body": self.body}

    def render(self) -> bytes:
        """`to_json()` as JSON, secrets masked, the stored body spliced in unparsed."""
        about = json.dumps(self._about(mask_secrets=True), separators=(",", ":")).encode()
        return about[:-1] + b',"body":' + self.compact + b"}"


class Journal:
    """A bounded, thread-safe buffer of `Entry`: the server appends, a test thread reads."""

    def __init__(self, capacity: int) -> None:
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"journal capacity must be from 1 to {MAX_CAPACITY}, got {capacity}")
        self.capacity = capacity
        self._entries: deque[Entry] = deque(maxlen=capacity)
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def record(self, *, method: str, path: str, headers: Mapping[str, str], body: Any) -> None:
        compact = json.dumps(body, separators=(",", ":")).encode()  # NaN kept, as json.loads took it
        self._append(method, path, headers, compact)

    def record_raw(self, *, method: str, path: str, headers: Mapping[str, str], raw: bytes) -> None:
        """Journal a body as the client sent it: JSON is kept compact (parsed once, only with the
        journal on), anything else as a JSON string of its text, so GET /journal stays valid JSON."""
        try:
            body: Any = json.loads(raw)
            compact = json.dumps(body, separators=(",", ":")).encode()
        except (ValueError, RecursionError):
            compact = json.dumps(raw.decode("utf-8", errors="replace")).encode()
        self._append(method, path, headers, compact)

    def _append(self, method: str, path: str, headers: Mapping[str, str], compact: bytes) -> None:
        with self._lock:
            entry = Entry(seq=next(self._seq), method=method, path=path, headers=headers, compact=compact)
            self._entries.append(entry)

    def entries(self) -> list[Entry]:
        """A snapshot, oldest first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def to_json(self) -> dict[str, Any]:
        entries = self.entries()
        return {
            "object": "list",
            "capacity": self.capacity,
            "scope": "this server process",
            "data": [entry.to_json() for entry in entries],
        }

    def render(self) -> bytes:
        """`to_json()` as the body of GET /journal.

        Each body as stored: ASCII-escaped, with NaN and infinities kept, as json.loads took
        them (lone surrogates and NaN, which UTF-8 and Starlette's strict JSONResponse refuse
        with a 500), and never parsed again (a body nested nearly to the parser's limit would
        overflow it here, deeper in the stack).
        """
        about = {"object": "list", "capacity": self.capacity, "scope": "this server process"}
        head = json.dumps(about, separators=(",", ":")).encode()[:-1]
        return head + b',"data":[' + b",".join(entry.render() for entry in self.entries()) + b"]}"


def headers_of(items: list[tuple[str, str]]) -> dict[str, str]:
    """Header pairs as one dict, repeated names joined as HTTP allows."""
    out: dict[str, str] = {}
    for name, value in items:
        name = name.lower()
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def _plain(path: str) -> str:
    """`path` without an `/o/{options}` prefix: `/o/latency=5/v1/messages` → `/v1/messages`."""
    if not path.startswith("/o/"):
        return path
    slash = path.find("/", 3)
    return path[slash:] if slash >= 0 else path


def matches(entry: Entry, *, path: str | None = None, model: str | None = None) -> bool:
    """Whether `entry` is for `path` (an `/o/{options}` prefix aside) and `model` (the whole
    model name, or the scenario before its `+options`); None matches anything."""
    if path is not None and _plain(entry.path) != _plain(path):
        return False
    if model is None:
        return True
    body = entry.body if b'"model"' in entry.compact else None
    sent = body.get("model") if isinstance(body, dict) else None
    return isinstance(sent, str) and model in (sent, sent.partition("+")[0])


def render_matching(journal: Journal, *, path: str | None = None, model: str | None = None) -> bytes:
    """GET /journal's body with only the entries that `matches(path, model)`."""
    if path is None and model is None:
        return journal.render()
    about = {"object": "list", "capacity": journal.capacity, "scope": "this server process"}
    head = json.dumps(about, separators=(",", ":")).encode()[:-1]
    kept = [entry.render() for entry in journal.entries() if matches(entry, path=path, model=model)]
    return head + b',"data":[' + b",".join(kept) + b"]}"
