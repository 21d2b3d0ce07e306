"""A run as rows: one head (the small fields that change in place), one row per item of each
list that only ever grows, and one row per entry of the dedupe cache (a dict that grows until
a write replaces it; its rows are written again only then). A save writes the head and the
items added since the last save of the same object, so it costs what the turn added, not what
the run holds.

`Tracker` remembers, per run, what a store has written of one live `RunState` object; any
edit that is not an append (a list replaced, its last item swapped, another object of the
same run) makes the next save a rewrite of the whole run. `assemble` turns rows back into a
checked `RunState` (depth-bounded, every field checked against its type hint).
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass, field, fields

from harness.codec import StateFileError, check_depth, dumps, dumps_data, from_data
from harness.state import Rejection, RunState, ToolRun
from harness.usage import Usage

APPEND_ONLY = ("messages", "turn_usage", "tool_runs", "rejections")
"""The lists of a run that only ever grow: one row per item."""
CACHE = "cache"
"""The dedupe cache: one row per entry, `[signature, index]`, so a save adds only new entries."""
HEAD = tuple(f.name for f in fields(RunState) if f.name not in (*APPEND_ONLY, CACHE, "run_id"))
"""Small fields that change in place: written whole at every save."""


_FIELDS = {cls: len(fields(cls)) for cls in (Usage, ToolRun, Rejection)}
"""The dataclasses a run's rows hold, by their number of fields."""


def _data(value: object) -> object:
    """`value`, or for one of `_FIELDS` holding nothing but its fields, its `__dict__`: what
    `codec.dumps` would ask `codec._plain` for, handed over without the encoder's call back into
    Python (the same text)."""
    n = _FIELDS.get(type(value))
    if n is not None and len(value.__dict__) == n:
        return value.__dict__
    return value


def row_json(value: object) -> str:
    """An item row's JSON: `dumps(value)`, a little faster (`_data`)."""
    return dumps(_data(value))


def head_json(state: RunState) -> str:
    return dumps({f: _data(getattr(state, f)) for f in HEAD})


@dataclass(kw_only=True)
class Delta:
    """What one save writes: the head, new items per list (from `start`), ledger changes."""

    rewrite: bool
    head: str
    items: dict[str, tuple[int, list[str]]]
    """Per list: the index of its first new item, and the new items as JSON."""
    cache: tuple[int, list[str]] = (0, [])
    """The cache's new entries as JSON, from this index; 0 with a cache seen before: rewrite it."""
    cache_rewrite: bool = False
    """The cache was replaced or edited, not only grown: its rows are written again whole."""
    started: list[tuple[str, str, str]] = field(default_factory=list)
    """Intents opened since the last save: (call id, tool, args JSON)."""
    finished: list[str] = field(default_factory=list)
    """Intents closed by a recorded result."""
    abandoned: list[str] = field(default_factory=list)
    """Intents dropped without a result (a person decided the in-doubt call again)."""

    def rows(self) -> list[tuple[str, int, str]]:
        """The new item rows: (list or `CACHE`, index, JSON)."""
        rows = [(f, seq, body) for f, (start, bodies) in self.items.items()
                for seq, body in enumerate(bodies, start)]
        start, bodies = self.cache
        return rows + [(CACHE, seq, body) for seq, body in enumerate(bodies, start)] if bodies else rows


@dataclass(kw_only=True)
class _Cursor:
    state: weakref.ref[RunState]
    lists: dict[str, tuple[list, int, object]]
    intents: frozenset[str]
    cache: tuple[dict, list[tuple[str, object]]]
    """The cache object written and its entries then, to tell growth from an edit."""

    def cache_grew(self, state: RunState) -> bool:
        obj, written = self.cache
        now = state.cache
        if now is not obj or len(now) < len(written):
            return False
        return all(a == b for a, b in zip(now.items(), written, strict=False))

    def follows(self, state: RunState) -> bool:
        if self.state() is not state:
            return False
        for f, (obj, n, last) in self.lists.items():
            now = getattr(state, f)
            if now is not obj or len(now) < n or (n and now[n - 1] is not last):
                return False
        return True


class Tracker:
    """What has been written of each live run object, so a save sends only what is new."""

    def __init__(self) -> None:
        self._cursors: dict[str, _Cursor] = {}

    def follows(self, state: RunState) -> bool:
        """Whether `state` is the object last written, with its lists only appended to since."""
        cursor = self._cursors.get(state.run_id)
        return cursor is not None and cursor.follows(state)

    def delta(self, state: RunState, written_intents: frozenset[str] | None = None, *,
              follows: bool | None = None) -> Delta:
        """The rows for saving `state`; `written_intents` is what the database holds open when
        this tracker does not know (a rewrite); `follows`: `self.follows(state)`, when known."""
        cursor = self._cursors.get(state.run_id)
        rewrite = cursor is None or not (cursor.follows(state) if follows is None else follows)
        items = {}
        for f in APPEND_ONLY:
            start = 0 if rewrite else cursor.lists[f][1]
            items[f] = (start, [row_json(x) for x in getattr(state, f)[start:]])
        cache_rewrite = rewrite or not cursor.cache_grew(state)
        entries = list(state.cache.items())[0 if cache_rewrite else len(cursor.cache[1]):]
        cache_start = 0 if cache_rewrite else len(cursor.cache[1])
        delta = Delta(rewrite=rewrite, head=head_json(state), items=items, cache_rewrite=cache_rewrite,
                      cache=(cache_start, [dumps_data([k, v]) for k, v in entries]))
        before = (written_intents or frozenset()) if rewrite else cursor.intents
        if not (before or state.intents):  # a turn without a write: no ledger change to look for
            return delta
        now = frozenset(state.intents)
        runs = state.tool_runs if rewrite else state.tool_runs[cursor.lists["tool_runs"][1]:]
        results = {r.call_id for r in runs}
        gone = sorted(before - now)
        delta.started = [(c, state.intents[c].tool, dumps(state.intents[c].args))
                         for c in sorted(now - before)]
        delta.finished = [c for c in gone if c in results]
        delta.abandoned = [c for c in gone if c not in results]
        return delta

    def written(self, state: RunState) -> None:
        """`state` is now in the database exactly as it is in memory."""
        lists = {f: (getattr(state, f), len(getattr(state, f)), (getattr(state, f) or [None])[-1])
                 for f in APPEND_ONLY}
        self._cursors[state.run_id] = _Cursor(state=weakref.ref(state), lists=lists,
                                              intents=frozenset(state.intents),
                                              cache=(state.cache, list(state.cache.items())))

    def forget(self, run_id: str) -> None:
        """A save failed half-way or was refused: the next save rewrites the run."""
        self._cursors.pop(run_id, None)


def assemble(run_id: str, head: str, items: list[tuple[str, int, str]], source: str) -> RunState:
    """The run that a head and its item rows (field, seq, body; ordered) describe."""
    check_depth(head, source)
    try:
        data = json.loads(head)
    except ValueError as e:
        raise StateFileError(f"{source}: the head row is not valid JSON ({e}); nothing was changed") from None
    if not isinstance(data, dict):
        raise StateFileError(f"{source}: the head row is not a JSON object; nothing was changed")
    data["run_id"] = run_id
    groups: dict[str, list[str]] = {f: [] for f in (*APPEND_ONLY, CACHE)}
    for name, seq, body in items:
        if name not in groups:
            raise StateFileError(f"{source}: an item row names an unknown list {name!r}; nothing was changed")
        if seq != len(groups[name]):
            raise StateFileError(
                f"{source}: item rows of {name} skip from {len(groups[name]) - 1} to {seq}; "
                "nothing was changed"
            )
        groups[name].append(body)
    entries = groups.pop(CACHE)
    if entries or CACHE not in data:  # a head written before the cache had rows still holds it
        data[CACHE] = _cache(entries, source)
    for name, bodies in groups.items():
        text = "[" + ",".join(bodies) + "]"
        check_depth(text, f"{source} ({name})", wrapper=1)
        try:
            data[name] = json.loads(text)
        except ValueError as e:
            raise StateFileError(
                f"{source}: a row of {name} is not valid JSON ({e}); nothing was changed"
            ) from None
    state = from_data(data, source=source)
    if state.run_id != run_id:
        raise StateFileError(f"{source} holds run {state.run_id!r}, not {run_id!r}")
    return state


def _cache(bodies: list[str], source: str) -> dict[str, object]:
    text = "[" + ",".join(bodies) + "]"
    check_depth(text, f"{source} ({CACHE})", wrapper=1)
    try:
        pairs = json.loads(text)
    except ValueError as e:
        raise StateFileError(f"{source}: a row of {CACHE} is not valid JSON ({e}); nothing was changed") \
            from None
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
        raise StateFileError(f"{source}: a row of {CACHE} is not a [signature, index] pair; "
                             "nothing was changed")
    return dict(pairs)
