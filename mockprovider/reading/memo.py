"""Transcripts the mock has read, recognised by the raw JSON text of their messages.

An agent loop resends its whole transcript every turn: at turn 100 a request carries ~200
messages of which two are new, and the JSON of the other ~198 is, byte for byte, what the
previous request carried (clients serialise deterministically). Parsing, checking and counting
them again was most of the mock's own time. So a chat body is parsed here with the stdlib's own
C scanner one top-level value at a time, and the text of its `messages` array is matched
against remembered transcripts: when it starts with a remembered transcript's text, those
messages and their summary come from memory, and only what follows is parsed and read.

Equal text parses to equal values, so reuse is exact (no field is compared loosely: `1` and
`1.0` differ as text). A body this parser does not expect (another encoding, anything odd)
goes to `json.loads` unchanged, so the answer to any body, good or bad, is what it was. The
memory is bounded in entries and in estimated bytes; a miss costs time, never correctness.
Nothing here is run state: every reply stays a pure function of its request.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from json.scanner import make_scanner
from typing import Any

import orjson

from mockprovider.offload import LARGE_BYTES, YIELDING, parse_yielding
from mockprovider.reading.transcript import Known, Summary

_scan = make_scanner(json.JSONDecoder())  # json.loads' own scanner (C), one value per call
_scan_yielding = make_scanner(YIELDING)  # the same, for a large body: other threads get turns
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json.decoder defines it

_DIGITS = bytes(48 if 48 <= b < 58 else 32 for b in range(256))
"""Every digit as `0`, every other byte as a space: `_LONG` in a body so mapped is a run of 19
digits, which an integer past 64 bits has and which orjson would read as a float."""
_LONG = b"0" * 19
Scanner = Callable[[str, int], tuple[Any, int]]

MIN_CHARS = 2048
"""Transcripts shorter than this are cheap to read and are not remembered (nor are bodies this
short searched for them)."""
WALK = 4
"""Remembered texts a lookup compares with the request's before it gives up (`Memory.find`)."""
ADMIT_EVERY = 32
"""When the memory is full, one new transcript in this many (one that extends none) is remembered."""
STALE_AFTER = 2
"""An entry not found in this many lookups per entry held is taken for a run that ended (`Memory`)."""
STALE_SECONDS = 30.0
"""An entry not found for this long is taken for a run that ended, too (`Memory`)."""


@dataclass(frozen=True, kw_only=True)
class Entry:
    text: str
    """The messages array's text between `[` and the end of its last message."""
    messages: list[Any]
    summary: Summary


class Memory:
    """Remembered transcripts, kept in their texts' sorted order; least recently used out first
    (stale ones first, `_keep_bounds`); safe across threads.

    If a request's text `q` begins with a remembered text `t`, every text sorted between `t` and
    `q` begins with `t` too; so the longest remembered text that `q` begins with sits just below
    `q`'s place in sorted order, or below continuations of `t` that `q` does not share. Those
    are common: `q` runs on past its messages (`],"tools":…`), and `]` sorts after the `,` with
    which a longer transcript of the same run goes on, so every finished run of the same task
    (a rerun, a benchmark's rounds) sorts between `q` and the entry it extends. A lookup bisects,
    and on a text that `q` does not begin with, bisects again for the part of `q` the two share:
    a text below it that `q` begins with is no longer than that part (`find`). Each comparison
    stops at the first character that differs, and nothing is hashed.

    An agent loop's request extends the transcript its previous request sent: the entry for the
    extended transcript replaces the one it extends, so a conversation holds one entry however
    long it runs. A retry finds the whole of its transcript remembered and adds nothing; a fork
    (another continuation of a transcript already extended) misses once and is read in full.

    When more conversations are in flight than the memory holds, a loop over them asks for each
    entry just after it became the least recently used: evicting that one would make every
    request miss. So once the memory is full, a new transcript (one that extends none) is
    remembered only one time in `ADMIT_EVERY`: the conversations held stay held and keep being
    read from memory, the others are read in full. Unless the least recently used entry went
    unfound for `STALE_AFTER` lookups per entry held, or for `STALE_SECONDS`: a loop over up to
    `STALE_AFTER` times as many conversations as the memory holds asks for each held entry
    sooner than that, so this one belongs to a run that ended, and the new transcript is held.
    Stale entries are pushed out first, the most recently used of them first (`_keep_bounds`):
    a loop that paused past `STALE_SECONDS` finds every entry stale when it goes on, and most
    often asks for them in the order it left them. (A loop whose turns come back slower than
    `STALE_SECONDS` sends so few requests a second that reading them in full costs little.) A
    long-lived mock whose memory filled with finished runs would otherwise read every new run in
    full until the one-in-`ADMIT_EVERY` admissions pushed the finished ones out.
    """

    def __init__(self, *, max_entries: int = 4096, max_bytes: int = 128 << 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        """Of the estimate `size`: an entry may share its messages with others, never more."""
        self._lock = threading.Lock()
        self._texts: list[str] = []  # sorted
        self._entries: list[Entry] = []  # self._entries[i].text is self._texts[i]
        self._lru: OrderedDict[int, Entry] = OrderedDict()
        self._bytes = 0
        self._new = 0  # transcripts that extend none, offered while the memory is full
        self._clock = clock
        self._lookups = 0
        self._found_at: dict[int, tuple[int, float]] = {}
        """id(entry) -> `_lookups` and the clock when it was last remembered or found."""

    @staticmethod
    def size(entry: Entry) -> int:
        """Bytes an entry may hold: its text, and its parsed messages (4x their JSON text,
        measured; ASCII text assumed, as clients send JSON with non-ASCII escaped)."""
        return 5 * len(entry.text)

    def find(self, s: str, start: int) -> Entry | None:
        """The longest remembered transcript whose text `s` has at `start` (a miss if it is not
        among the first `WALK` candidates)."""
        if len(s) - start < MIN_CHARS:
            return None
        q = s[start:]
        with self._lock:
            self._lookups += 1
            texts = self._texts
            i = bisect_right(texts, q)
            for _ in range(WALK):
                if i == 0:
                    return None
                text = texts[i - 1]
                if q.startswith(text):
                    entry = self._entries[i - 1]
                    self._lru.move_to_end(id(entry))
                    self._found_at[id(entry)] = (self._lookups, self._clock())
                    return entry
                # A text `q` begins with that sorts below `text` is no longer than what the two
                # share: were it longer, it would differ from `text` where `q` does, sorting
                # above it. So the next candidate is the last text sorted at or below that part.
                if not text.startswith(q[:MIN_CHARS]):
                    return None  # (another task's, most often) nothing shorter is remembered
                shared = _shared(q, text)
                i = bisect_right(texts, q[:shared], 0, i - 1)
        return None

    def remember(self, entry: Entry, replaces: Entry | None = None) -> None:
        """Hold `entry`; `replaces`, the entry whose transcript it extends, goes."""
        if len(entry.text) < MIN_CHARS or self.size(entry) > self.max_bytes // 8:
            return  # tiny ones are cheap to read; one huge one would push out everything else
        with self._lock:
            now = self._clock()
            if replaces is not None and self._lru.get(id(replaces)) is replaces:
                self._drop(replaces)
            elif replaces is None and self._full(entry) and not self._oldest_stale(now):
                self._new += 1
                if self._new % ADMIT_EVERY:
                    return
            i = bisect_left(self._texts, entry.text)
            if i < len(self._texts) and self._texts[i] == entry.text:
                return  # a request sent twice at once: the first remembered it
            self._texts.insert(i, entry.text)
            self._entries.insert(i, entry)
            self._lru[id(entry)] = entry
            self._found_at[id(entry)] = (self._lookups, now)
            self._bytes += self.size(entry)
            self._keep_bounds(now)

    def _stale(self, key: int, now: float) -> bool:
        """Whether the entry `key` went unfound for `STALE_AFTER` lookups per entry held or for
        `STALE_SECONDS` (until `now`)."""
        lookups, seconds = self._found_at[key]
        return self._lookups - lookups > STALE_AFTER * len(self._lru) or now - seconds > STALE_SECONDS

    def _oldest_stale(self, now: float) -> bool:
        """Whether the least recently used entry is stale."""
        oldest = next(iter(self._lru), None)
        return oldest is not None and self._stale(oldest, now)

    def _over(self) -> bool:
        return len(self._lru) > self.max_entries or self._bytes > self.max_bytes

    def _keep_bounds(self, now: float) -> None:
        """Entries pushed out until the memory keeps to its bounds: the least recently used first,
        unless it is stale; then the stale entries go first, the most recently used of them first.
        A loop over more conversations than the memory holds that paused past `STALE_SECONDS`
        finds every entry stale when it goes on, and asks for them in the order it left them,
        least recently used first: pushing that one out would push out the entry asked next, and
        each miss would make the next."""
        if not self._over():
            return
        if not self._oldest_stale(now):
            while self._over():
                self._drop(next(iter(self._lru.values())))
            return
        keys = list(self._lru)
        # Entries are found, or held, at the LRU order's end, so the stale ones are its first
        # `low`: bisected, a handful of checks however many are held.
        low, high = 1, len(keys)
        while low < high:
            mid = (low + high) // 2
            if self._stale(keys[mid], now):
                low = mid + 1
            else:
                high = mid
        for key in itertools.chain(reversed(keys[:low]), keys[low:]):
            if not self._over():
                return
            self._drop(self._lru[key])

    def _full(self, entry: Entry) -> bool:
        """Whether holding `entry` too would push another out."""
        return len(self._lru) >= self.max_entries or self._bytes + self.size(entry) > self.max_bytes

    def _drop(self, entry: Entry) -> None:
        i = bisect_left(self._texts, entry.text)
        del self._texts[i], self._entries[i], self._lru[id(entry)], self._found_at[id(entry)]
        self._bytes -= self.size(entry)

    def clear(self) -> None:
        """Forget everything, the count of new transcripts offered too: the memory is as new."""
        with self._lock:
            self._texts.clear()
            self._entries.clear()
            self._lru.clear()
            self._found_at.clear()
            self._bytes = 0
            self._new = 0
            self._lookups = 0

    def stats(self) -> tuple[int, int]:
        """Entries held and their estimated bytes."""
        with self._lock:
            return len(self._lru), self._bytes


MEMORY = Memory()
"""One per process: every app in it reads through the same memory."""


class _Unusual(Exception):
    """The body is not a plain UTF-8 JSON object: let json.loads have it."""


def _shared(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b`, by halving: the parts copied and
    compared (in C) add up to the shorter one's length at most."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _ws(s: str, i: int) -> int:
    return _WHITESPACE.match(s, i).end()  # type: ignore[union-attr]


def _messages(s: str, i: int, memory: Memory, _scan: Scanner) -> tuple[list[Any], Known, int]:
    """The array at `s[i] == "["`: its messages, what memory knew of them, and the index after it."""
    start = i + 1
    entry = memory.find(s, start)
    if entry is None:  # all of it is new: the C scanner reads it in one call
        messages, after = _scan(s, i)
        end = after - 1
        while s[end - 1] in " \t\n\r":
            end -= 1
        known = Known(count=0, summary=None, remember=_remember(memory, s, start, end, messages, None))
        return messages, known, after
    messages = list(entry.messages)
    end = start + len(entry.text)
    j = _ws(s, end)
    while s[j] == ",":
        value, end = _scan(s, _ws(s, j + 1))
        messages.append(value)
        j = _ws(s, end)
    if s[j] != "]":
        raise _Unusual
    known = Known(
        count=len(entry.messages), summary=entry.summary,
        remember=_remember(memory, s, start, end, messages, entry),
        span=(start, start + len(entry.text)) if s.isascii() else None,
    )
    return messages, known, j + 1


def _remember(memory: Memory, s: str, start: int, end: int, messages: list[Any],
              extends: Entry | None) -> Callable[[Summary], None]:
    """Remember `messages` under their text `s[start:end]`, once their summary is known, in place
    of `extends`, the remembered transcript they begin with."""
    return lambda summary: memory.remember(Entry(text=s[start:end], messages=messages, summary=summary),
                                           extends)


def _object(s: str, memory: Memory, _scan: Scanner = _scan) -> tuple[dict[str, Any], Known | None]:
    i = _ws(s, 0)
    if s[i] != "{":
        raise _Unusual
    body: dict[str, Any] = {}
    known = None
    i = _ws(s, i + 1)
    while s[i] != "}":
        if s[i] != '"':
            raise _Unusual
        key, i = _scan(s, i)
        i = _ws(s, i)
        if s[i] != ":":
            raise _Unusual
        i = _ws(s, i + 1)
        if key == "messages" and s[i] == "[":
            body[key], known, i = _messages(s, i, memory, _scan)
        else:
            body[key], i = _scan(s, i)
            known = None if key == "messages" else known
        i = _ws(s, i)
        if s[i] == ",":
            i = _ws(s, i + 1)
            if s[i] == "}":
                raise _Unusual  # a trailing comma: json.loads words the error
        elif s[i] != "}":
            raise _Unusual
    if _ws(s, i + 1) != len(s):
        raise _Unusual
    return body, known


def parse(raw: bytes, memory: Memory = MEMORY) -> tuple[Any, Known | None]:
    """`json.loads(raw)`, and for a chat body what memory knew of its messages.

    Raises `ValueError` or `RecursionError` exactly where `json.loads` does.
    """
    if len(raw) < MIN_CHARS:
        # orjson reads every body it accepts as json.loads does, except integers past 64 bits
        # (floats to it: `_LONG` keeps those bodies away); what it refuses (NaN, 1e400, a lone
        # surrogate, a BOM, every error) is read below, as before (results/bench.md, speed
        # tricks: "short body parsed by orjson"). Found with find, not `in` (`transcript.tools_key` says why).
        if raw.translate(_DIGITS).find(_LONG) < 0:
            try:
                return orjson.loads(raw), None
            except orjson.JSONDecodeError:
                pass
        return json.loads(raw), None
    large = len(raw) > LARGE_BYTES
    try:
        if json.detect_encoding(raw) != "utf-8":
            raise _Unusual
        return _object(raw.decode("utf-8", "surrogatepass"), memory, _scan_yielding if large else _scan)
    except (_Unusual, ValueError, StopIteration, IndexError, RecursionError):
        return (parse_yielding if large else json.loads)(raw), None
