"""The request journal: the last N requests this server process received, for tests to inspect.

Off by default (`--journal N` turns it on). It observes and never steers: no scenario reads it,
so the mock stays stateless in everything it answers. It is per process — behind several
workers each keeps its own — and bounded twice: at most N entries and at most `max_bytes` of
them, the oldest dropping out first. A body is kept as the JSON text the client sent (so it
costs its own size), or, when that text is not strict JSON, as the JSON that stands for it:
NaN and infinities as the strings "NaN", "Infinity", "-Infinity", a body that is not JSON as
one string of its text. So every page of GET /journal is strict JSON.

`GET /journal` serves it (behind the API key when one is set) with every header whose name
looks like a credential masked; in-process (the pytest fixture) an entry keeps its headers as
sent, but its repr, and its headers' repr, mask them, so a failing assertion prints no key.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
from collections import deque
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, replace
from math import isfinite
from typing import Any, Literal

MAX_CAPACITY = 100_000
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})

MAX_BYTES = 64 * 1024 * 1024
"""What a journal keeps at most by default, bodies and headers counted as stored."""
_ENTRY_BYTES = 256
"""Counted per entry beside its body and headers: the objects that hold them."""
_HEADER_BYTES = 40
"""Counted per header beside its two strings (each at its size as an object): its dict slot."""
_SECRET = re.compile(r"key|token|auth|secret|cookie|pass|session|signature|credential|jwt|bearer|private",
                     re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^\s*(?:bearer|basic|digest)\s|\b(?:sk|pk|rk)-[\w-]{8,}|\bAIza[\w-]{20,}",
                           re.IGNORECASE)
"""A value that is a credential whatever its header's name: an HTTP auth scheme, an API key."""
MASK = "<redacted>"


def looks_secret(name: str, value: str = "") -> bool:
    """A header or parameter whose name suggests a credential (`x-goog-api-key`, `x-auth-token`,
    `cookie`, `x-amz-credential`, ...) or whose `value` is one (`Bearer …`, `sk-…`): never shown."""
    return (name.lower() in SECRET_HEADERS or _SECRET.search(name) is not None
            or _SECRET_VALUE.search(value) is not None)


class Headers:
    """A request's headers as sent, read like a dict (`[name]`, `get`, `items`, `==` a dict),
    whose repr masks every credential. Not a `Mapping` on purpose: pytest prints a failed
    comparison of two mappings item by item, and so would print the key; of anything else, it
    prints the repr."""

    def __init__(self, items: Mapping[str, str]) -> None:
        self._items = dict(items)

    def __getitem__(self, name: str) -> str:
        return self._items[name]

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._items.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> KeysView[str]:
        return self._items.keys()

    def items(self) -> ItemsView[str, str]:
        return self._items.items()

    def values(self) -> ValuesView[str]:
        return self._items.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._items == other._items
        return isinstance(other, Mapping) and self._items == dict(other)

    __hash__ = None  # type: ignore[assignment]

    def masked(self) -> dict[str, str]:
        return {name: MASK if looks_secret(name, value) else value for name, value in self._items.items()}

    def __repr__(self) -> str:
        return repr(self.masked())


@dataclass(frozen=True, kw_only=True, repr=False)
class Entry:
    """One request as the server received it."""

    seq: int
    """Counts from 0 over the process's life; a gap before the first entry means entries dropped out."""
    method: str
    path: str
    headers: Headers
    """Lower-cased names, as sent (repeated headers joined with ', '); the repr masks credentials."""
    test_id: str | None = None
    """The test that sent it (`x-test-id`, or `test=` in the base URL), when one said so."""
    compact: bytes
    """The body as strict JSON text (see the module's docstring): parsed, it would take some
    twenty times the memory."""
    kind: Literal["model", "mcp"] = "model"
    """"model": a request to the model's endpoints; "mcp": a message to or from the MCP server."""
    direction: Literal["in", "out", "note"] = "in"
    """"in" (received), "out" (an MCP answer or notification sent), or "note" (something the MCP
    server did that no message says: an effect run, a call stopped, an answer dropped)."""
    session: str | None = None
    """The MCP session (`Mcp-Session-Id`) of an MCP entry."""
    tool: str | None = None
    """The tool of an MCP `tools/call`, its answers and its notes."""
    status: int | None = None
    """The HTTP status an MCP answer went out with."""
    model: str | None = None
    """The model the request named (its body's `model`, or a Gemini URL's), read when it was
    journalled: `GET /journal?model=` compares it and parses no body."""

    @property
    def body(self) -> Any:
        """The parsed JSON body (a fresh copy each time)."""
        return json.loads(self.compact)

    def _about(self, *, mask_secrets: bool) -> dict[str, Any]:
        headers = {
            name: (MASK if mask_secrets and looks_secret(name, value) else value)
            for name, value in self.headers.items()
        }
        about = {"seq": self.seq, "method": self.method, "path": self.path, "test_id": self.test_id,
                 "headers": headers}
        if self.kind != "model":
            about.update(kind=self.kind, direction=self.direction, session=self.session, tool=self.tool,
                         status=self.status)
        return about

    def to_json(self, *, mask_secrets: bool = True) -> dict[str, Any]:
        return {**self._about(mask_secrets=mask_secrets), "body": self.body}

    def __repr__(self) -> str:
        body = self.compact[:200].decode("utf-8", "replace") + ("..." if len(self.compact) > 200 else "")
        mcp = "" if self.kind == "model" else (f"kind={self.kind!r}, direction={self.direction!r}, "
                                               f"session={self.session!r}, tool={self.tool!r}, ")
        return (f"Entry(seq={self.seq}, {mcp}method={self.method!r}, path={self.path!r}, "
                f"test_id={self.test_id!r}, headers={self.headers!r}, body={body!r})")

    @property
    def size(self) -> int:
        """The bytes this entry counts against its journal's `max_bytes`."""
        # A header of two short strings costs many times its characters: counted as objects, so
        # thousands of tiny headers cannot hold more memory than the bound says.
        headers = sum(sys.getsizeof(name) + sys.getsizeof(value) + _HEADER_BYTES
                      for name, value in self.headers.items())
        return _ENTRY_BYTES + len(self.path) + len(self.test_id or "") + headers + len(self.compact) \
            + len(self.session or "") + len(self.tool or "")

    def render(self) -> bytes:
        """`to_json()` as JSON, secrets masked, the stored body spliced in unparsed."""
        about = json.dumps(self._about(mask_secrets=True), separators=(",", ":")).encode()
        return about[:-1] + b',"body":' + self.compact + b"}"


class Journal:
    """A bounded, thread-safe buffer of `Entry`: the server appends, a test thread reads."""

    def __init__(self, capacity: int, *, max_bytes: int = MAX_BYTES) -> None:
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"journal capacity must be from 1 to {MAX_CAPACITY}, got {capacity}")
        if max_bytes < 1024:
            raise ValueError(f"a journal's max_bytes must be at least 1024, got {max_bytes}")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: deque[Entry] = deque()
        self._bytes = 0
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def record(self, *, method: str, path: str, headers: Mapping[str, str], body: Any,
               test_id: str | None = None, **mcp: Any) -> None:
        """Journal a parsed body (NaN and infinities become strings, as for a raw one)."""
        self.record_raw(method=method, path=path, headers=headers, raw=json.dumps(body).encode(),
                        test_id=test_id, **mcp)

    def record_raw(self, *, method: str, path: str, headers: Mapping[str, str], raw: bytes,
                   test_id: str | None = None, **mcp: Any) -> None:
        """Journal a body as the client sent it: strict JSON as it is, anything else as the JSON
        that stands for it (parsed once, only with the journal on). `mcp`: an MCP entry's `kind`,
        `direction`, `session`, `tool` and `status` (see `Entry`)."""
        compact, model = _strict_and_model(raw)
        self._append(method, path, headers, compact, test_id, {"model": model_named(path, model), **mcp})

    def _append(self, method: str, path: str, headers: Mapping[str, str], compact: bytes,
                test_id: str | None, mcp: Mapping[str, Any]) -> None:
        with self._lock:
            entry = Entry(seq=next(self._seq), method=method, path=path, headers=Headers(headers),
                          test_id=test_id, compact=compact, **mcp)
            if entry.size > self.max_bytes:
                note = f"(a body of {len(compact)} bytes, more than the journal keeps: {self.max_bytes})"
                entry = replace(entry, compact=json.dumps(note).encode())
            self._entries.append(entry)
            self._bytes += entry.size
            while len(self._entries) > self.capacity or self._bytes > self.max_bytes:
                self._bytes -= self._entries.popleft().size

    def entries(self, *, test_id: str | None = None) -> list[Entry]:
        """A snapshot, oldest first: every entry, or those of `test_id`."""
        with self._lock:
            if test_id is None:
                return list(self._entries)
            return [e for e in self._entries if e.test_id == test_id]

    def clear(self, *, test_id: str | None = None) -> None:
        """Forget every entry, or only those of `test_id`."""
        with self._lock:
            if test_id is None:
                self._entries.clear()
            else:
                self._entries = deque(e for e in self._entries if e.test_id != test_id)
            self._bytes = sum(e.size for e in self._entries)

    @property
    def kept_bytes(self) -> int:
        """What the entries held now count against `max_bytes`."""
        with self._lock:
            return self._bytes

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

        Each body spliced in as stored, already strict JSON, and never parsed again (a body
        nested nearly to the parser's limit would overflow it here, deeper in the stack).
        """
        about = {"object": "list", "capacity": self.capacity, "scope": "this server process"}
        head = json.dumps(about, separators=(",", ":")).encode()[:-1]
        return head + b',"data":[' + b",".join(entry.render() for entry in self.entries()) + b"]}"


def strict_json(raw: bytes) -> bytes:
    """`raw` when it is strict JSON in UTF-8; else JSON that stands for it: non-finite numbers
    (NaN, Infinity, 1e999) as strings, a body that is not JSON as a string of its text."""
    return _strict_and_model(raw)[0]


def _strict_and_model(raw: bytes) -> tuple[bytes, Any]:
    """`strict_json(raw)`, and the body's `model` field (read as it is parsed), if any."""
    finite = True

    def number(text: str) -> Any:
        nonlocal finite
        value = float(text)
        if isfinite(value):
            return value
        finite = False
        return text

    def constant(name: str) -> str:
        nonlocal finite
        finite = False
        return name

    try:
        # The hook lets other threads in between objects: a long body is a long stretch of C.
        value = json.loads(raw.decode("utf-8"), parse_float=number, parse_constant=constant,
                           object_hook=_as_is)
    except (ValueError, RecursionError):
        # Nested deeper than the parser goes, the model is still read: it leads a client's body.
        leading = _LEADING_MODEL.match(raw)
        return json.dumps(raw.decode("utf-8", errors="replace"), ensure_ascii=False).encode(), \
            json.loads(leading[1]) if leading else None
    model = value.get("model") if isinstance(value, dict) else None
    if finite:
        return raw, model
    # ASCII-escaped: a lone surrogate the client escaped stays an escape, valid in UTF-8.
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode(), model


def _as_is(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def model_named(path: str, sent: Any) -> str | None:
    """The model a request to `path` whose body's `model` is `sent` names, if any."""
    if sent is None and (named := _GEMINI_MODEL.match(plain_path(path))):
        sent = named[1]  # Gemini and Vertex name the model in the URL, not the body
    if sent is None:
        sent = _bedrock_model(plain_path(path))
    return sent if isinstance(sent, str) else None


def headers_of(items: list[tuple[str, str]]) -> dict[str, str]:
    """Header pairs as one dict, repeated names joined as HTTP allows."""
    out: dict[str, str] = {}
    for name, value in items:
        name = name.lower()
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


_LEADING_MODEL = re.compile(rb'\{\s*"model"\s*:\s*("(?:[^"\\]|\\.)*")')
_GEMINI_MODEL = re.compile(
    r"/v1(?:beta1?)?/(?:projects/[^/]+/locations/[^/]+/publishers/google/)?models/([^/]+):[^/:]+")
"""A Gemini method's path, on the Gemini API or on Vertex AI: the model it names."""
_BEDROCK_METHODS = frozenset({"converse", "converse-stream", "count-tokens", "invoke"})
_GEMINI_VERSION = re.compile(r"^/v1(?:beta)?(?=/models/[^/]+:)")


def plain_path(path: str) -> str:
    """`path` without an `/o/{options}` prefix: `/o/latency=5/v1/messages` → `/v1/messages`."""
    if not path.startswith("/o/"):
        return path
    slash = path.find("/", 3)
    return path[slash:] if slash >= 0 else path


def same_route(path: str) -> str:
    """`path` as the route that answers it: no options prefix, and a Gemini method under one
    version prefix, since google-genai posts to `/v1/...` or `/v1beta/...` as it is set up and
    the mock answers both alike (`/v1/models/m:generateContent` → `/v1beta/models/m:generateContent`)."""
    return _GEMINI_VERSION.sub("/v1beta", plain_path(path))


def matches(entry: Entry, *, path: str | None = None, model: str | None = None,
            test_id: str | None = None, kind: str | None = None, tool: str | None = None,
            session: str | None = None) -> bool:
    """Whether `entry` is for `path` (`same_route`), `model` (the whole model name, or the
    scenario before its `+options`) and `test_id`, of `kind` ("model" or "mcp"), and about the
    MCP `tool` and `session`; None matches anything."""
    if path is not None and same_route(entry.path) != same_route(path):
        return False
    if (kind is not None and entry.kind != kind) or (tool is not None and entry.tool != tool):
        return False
    if session is not None and entry.session != session:
        return False
    if test_id is not None and entry.test_id != test_id:
        return False
    if (kind is not None and entry.kind != kind) or (tool is not None and entry.tool != tool):
        return False
    if session is not None and entry.session != session:
        return False
    if model is None:
        return True
    sent = entry.model
    return sent is not None and model in (sent, sent.partition("+")[0])


def _bedrock_model(path: str) -> str | None:
    """The model a Bedrock path names (`/model/{modelId}/converse`; an ARN by its last path
    segment), read without a regex: a path is the client's, and may be long."""
    head, _, method = path.rpartition("/")
    if not path.startswith("/model/") or method not in _BEDROCK_METHODS:
        return None
    model_id = head.removeprefix("/model/")
    return model_id.rpartition("/")[2] if model_id.startswith("arn:") else model_id


def render_matching(journal: Journal, *, path: str | None = None, model: str | None = None,
                    test_id: str | None = None, kind: str | None = None, tool: str | None = None,
                    session: str | None = None) -> bytes:
    """GET /journal's body with only the entries that `matches(...)` the filters given."""
    filters = {"path": path, "model": model, "test_id": test_id, "kind": kind, "tool": tool,
               "session": session}
    if all(value is None for value in filters.values()):
        return journal.render()
    about = {"object": "list", "capacity": journal.capacity, "scope": "this server process"}
    head = json.dumps(about, separators=(",", ":")).encode()[:-1]
    kept = [entry.render() for entry in journal.entries() if matches(entry, **filters)]
    return head + b',"data":[' + b",".join(kept) + b"]}"
