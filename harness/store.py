"""Where runs are kept: a tiny protocol, a file store and an in-memory one, both journaled.

A save costs what the turn added, not what the run holds. Each run is a snapshot plus an
append-only journal: a save appends one record with the fields that changed in place (counters,
the stop, approvals, intents — all small) and the items appended to the four lists that only
grow (messages, turn_usage, tool_runs, rejections) since the previous save. When the journal
outgrows the snapshot, the store writes a new snapshot and empties the journal, so the bytes
written stay proportional to what the run added.

Crash safety (FileStore): a journal record is one line, fsynced; a line cut short by a crash
has no newline and is ignored on load (the previous save is intact). A snapshot is written to
a temp file, fsynced, renamed over the old one and the folder fsynced, so a crash leaves the
old snapshot or the new one. Every record carries a sequence number and the snapshot the last
number it includes, so records already folded into a snapshot are skipped. The first save of
a run a store did not itself write or load, and of a run loaded from disk, is a snapshot.

The contract that makes this safe: the four lists only ever grow in place (the loop, `approve`
and `reject` only append); any other edit replaces the list, or its last item, and the store
then writes a snapshot. A store never replays a record onto a snapshot of another generation.

`load` refuses corrupt, foreign and unknown-version files with a `StateFileError` and never
modifies them.

One writer per run (FileStore): `claim(run_id)` takes an exclusive `flock` on `<id>.lock`
without waiting and writes who holds it (pid, since when, the command) into the file. The OS
drops the lock when its holder exits, SIGKILL included, so a dead process never holds a run:
the next claim simply succeeds and recovers it. A second claim while the holder lives raises
`RunOwned` at once. A store that has not claimed a run may still save it (the Python API's
single-process use), but refuses with `RunOwned` while another holder has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from itertools import islice
from pathlib import Path
from typing import Protocol

from harness.codec import StateFileError, dumps_data, from_data, to_dict
from harness.state import RunState, check_run_id

APPEND_ONLY = ("messages", "turn_usage", "tool_runs", "rejections")
"""The lists of a run that only ever grow: a journal record carries only their new items."""
IN_PLACE = tuple(
    f.name for f in fields(RunState) if f.name not in (*APPEND_ONLY, "cache", "run_id", "schema_version")
)
"""Small fields that change in place: a record carries them whole. (The dedupe cache only grows
until a write replaces it with an empty one, so a record carries its new entries.)"""
MIN_COMPACT_BYTES = 64 * 1024


class RunOwned(Exception):
    """Another live process holds the run; carries who, since when, and what to do."""

    def __init__(self, run_id: str, holder: dict[str, object]) -> None:
        self.run_id, self.holder = run_id, holder
        pid, since, command = holder.get("pid", "?"), holder.get("since"), holder.get("command")
        when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))
                if isinstance(since, int | float) else "an unknown time")
        what = f" ({command})" if isinstance(command, str) and command else ""
        super().__init__(
            f"run {run_id} is owned by process {pid}{what} since {when}; wait for it to stop, then "
            "retry (if that process is gone, the lock was released with it and a retry recovers the run)"
        )


class Store(Protocol):
    def save(self, state: RunState) -> None: ...
    def load(self, run_id: str) -> RunState: ...


@dataclass(kw_only=True)
class _Cursor:
    """What this store has persisted of one live `RunState` object, and in which generation.

    A generation is one snapshot and the records written after it; a record of another
    generation (left behind when a crash fell between a snapshot's rename and the journal's
    truncation) is never replayed.
    """

    state: weakref.ref[RunState]
    generation: str
    seq: int = 0
    lists: dict[str, tuple[list, int, object]] = field(default_factory=dict)
    """Per append-only list: the list object, how many items are persisted, the last of them."""
    cache: tuple[dict, int] = ({}, 0)
    snapshot_bytes: int = 0
    journal_bytes: int = 0

    def follows(self, state: RunState) -> bool:
        """Whether `state` is this object with its lists only appended to since the last save."""
        if self.state() is not state:
            return False
        for f, (obj, n, last) in self.lists.items():
            now = getattr(state, f)
            if now is not obj or len(now) < n or (n and now[n - 1] is not last):
                return False
        return True

    def advance(self, state: RunState) -> None:
        self.lists = {f: (getattr(state, f), len(getattr(state, f)), (getattr(state, f) or [None])[-1])
                      for f in APPEND_ONLY}
        self.cache = (state.cache, len(state.cache))


def _record(state: RunState, cursor: _Cursor) -> str:
    body: dict = {"gen": cursor.generation, "seq": cursor.seq + 1,
                  "set": {f: to_dict(getattr(state, f)) for f in IN_PLACE}, "add": {}}
    for f, (_, n, _) in cursor.lists.items():
        if items := getattr(state, f)[n:]:
            body["add"][f] = [to_dict(x) for x in items]
    cache, known = cursor.cache
    if state.cache is not cache or len(state.cache) < known:
        body["set"]["cache"] = dict(state.cache)
    elif len(state.cache) > known:
        body["cache_add"] = dict(islice(state.cache.items(), known, None))
    return dumps_data(body) + "\n"  # its parts are plain data already


def _apply(data: dict, rec: dict) -> None:
    if not (rec.keys() <= {"gen", "seq", "set", "add", "cache_add"}
            and rec["set"].keys() <= {*IN_PLACE, "cache"} and rec["add"].keys() <= set(APPEND_ONLY)):
        raise ValueError("unexpected keys")
    data.update(rec["set"])
    # In place: `data` is freshly parsed, and copying every list per record made a load
    # quadratic in the journal's length.
    for f, items in rec["add"].items():
        if not isinstance(items, list):
            raise TypeError(f"add.{f} is not a list")
        data[f].extend(items)
    if not isinstance(added := rec.get("cache_add", {}), dict):
        raise TypeError("cache_add is not an object")
    data["cache"].update(added)


def _replay(source: str, snapshot: bytes, journal: bytes) -> tuple[RunState, str, int]:
    """The run a snapshot and its journal describe, its generation, the last record applied."""
    try:
        data = json.loads(snapshot)
    except ValueError as e:
        raise StateFileError(f"{source} is not valid JSON ({e}); the file was left untouched") from None
    if not isinstance(data, dict):
        return from_data(data, source=source), "", 0
    generation, seq = data.pop("journal_generation", ""), 0
    lines = journal.split(b"\n")[:-1]  # the part after the last newline is a torn write: ignored
    for n, line in enumerate(lines, 1):
        try:
            rec = json.loads(line)
            if rec.get("gen") != generation:
                continue  # written before this snapshot, which already holds it
            if rec.get("seq") != seq + 1:
                raise ValueError(f"record {rec.get('seq')!r} follows {seq}")
            _apply(data, rec)
            seq += 1
        except (ValueError, AttributeError, TypeError, KeyError) as e:
            raise StateFileError(
                f"{source}: journal line {n} is damaged ({e}); the files were left untouched"
            ) from None
    return from_data(data, source=source), generation, seq


def _snapshot_dict(state: RunState, generation: str) -> dict:
    # Messages are plain JSON already: passed through, not deep-copied.
    data = {f.name: getattr(state, f.name) if f.name == "messages" else to_dict(getattr(state, f.name))
            for f in fields(RunState)}
    data["journal_generation"] = generation
    return data


class _JournaledStore:
    """The journal logic; subclasses say where snapshots and records go."""

    def __init__(self) -> None:
        self._cursors: dict[str, _Cursor] = {}

    def save(self, state: RunState) -> None:
        cursor = self._cursors.get(state.run_id)
        if cursor is None or not cursor.follows(state) or cursor.journal_bytes > max(
            MIN_COMPACT_BYTES, cursor.snapshot_bytes
        ):
            return self._compact(state)
        line = _record(state, cursor)
        try:
            self._append(state.run_id, line)
        except BaseException:
            del self._cursors[state.run_id]  # a torn line may be on disk: the next save is a snapshot
            raise
        cursor.seq += 1
        cursor.advance(state)
        cursor.journal_bytes += len(line)

    def _compact(self, state: RunState) -> None:
        self._cursors.pop(state.run_id, None)
        generation = secrets.token_hex(8)
        text = dumps_data(_snapshot_dict(state, generation))
        self._write_snapshot(state.run_id, text)
        cursor = _Cursor(state=weakref.ref(state), generation=generation, snapshot_bytes=len(text))
        cursor.advance(state)
        self._cursors[state.run_id] = cursor

    def load(self, run_id: str) -> RunState:
        snapshot, journal, source = self._read(check_run_id(run_id))
        state, _, _ = _replay(source, snapshot, journal)
        if state.run_id != run_id:
            raise StateFileError(f"{source} holds run {state.run_id!r}, not {run_id!r}")
        return state  # no cursor: the next save of it is a snapshot, which also drops a torn tail

    def _write_snapshot(self, run_id: str, text: str) -> None:
        raise NotImplementedError

    def _append(self, run_id: str, line: str) -> None:
        raise NotImplementedError

    def _read(self, run_id: str) -> tuple[bytes, bytes, str]:
        raise NotImplementedError


class FileStore(_JournaledStore):
    """`<id>.json` (the snapshot) and `<id>.journal` per run in `directory`."""

    def __init__(self, directory: str | os.PathLike[str], *,
                 checkpoint: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.checkpoint = checkpoint
        """Test hook: called with "mid_save" inside every write, at the point a crash would tear it."""
        self._claimed: set[str] = set()

    def lock_path(self, run_id: str) -> Path:
        return self.directory / f"{check_run_id(run_id)}.lock"

    @contextlib.contextmanager
    def claim(self, run_id: str) -> Iterator[None]:
        """Own `run_id` while the block runs; `RunOwned` at once if a live process owns it."""
        _ensure_dir(self.directory)
        fd = os.open(self.lock_path(run_id), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunOwned(run_id, _holder(fd, wait=True)) from None
            holder = {"pid": os.getpid(), "since": round(time.time(), 3), "command": " ".join(sys.argv)[:500]}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode(), 0)
            self._claimed.add(run_id)
            try:
                yield
            finally:
                self._claimed.discard(run_id)
        finally:
            os.close(fd)  # releases the lock

    def _check_owner(self, run_id: str) -> None:
        """An unclaimed save: refuse while another holder has the run (probe, release at once)."""
        if run_id in self._claimed:
            return
        try:
            fd = os.open(self.lock_path(run_id), os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunOwned(run_id, _holder(fd)) from None
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def save(self, state: RunState) -> None:
        self._check_owner(state.run_id)
        super().save(state)

    def path(self, run_id: str) -> Path:
        return self.directory / f"{check_run_id(run_id)}.json"

    def journal_path(self, run_id: str) -> Path:
        return self.directory / f"{check_run_id(run_id)}.journal"

    def _hook(self) -> None:
        if self.checkpoint:
            self.checkpoint("mid_save")

    def _write_snapshot(self, run_id: str, text: str) -> None:
        _ensure_dir(self.directory)
        final = self.path(run_id)
        # Unique per writer, created exclusively and never through a symlink.
        tmp = final.with_name(f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            # A file object writes every byte or raises (a bare os.write may write part of it).
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode())
                f.flush()
                os.fsync(f.fileno())
            self._hook()
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        journal = os.open(self.journal_path(run_id), flags, 0o600)
        os.close(journal)  # its records are in the snapshot now (and skipped by sequence number)
        _fsync_dir(self.directory)

    def _append(self, run_id: str, line: str) -> None:
        data = line.encode()
        fd = os.open(self.journal_path(run_id), os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        with os.fdopen(fd, "ab") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            self._hook()
            f.write(data[len(data) // 2 :])
            f.flush()
            os.fsync(f.fileno())

    def _read(self, run_id: str) -> tuple[bytes, bytes, str]:
        path = self.path(run_id)
        try:
            snapshot = _read_nofollow(path)
        except FileNotFoundError:
            known = ", ".join(self.run_ids()) or "none"
            raise FileNotFoundError(
                f"no saved run {run_id!r} in {self.directory}; saved runs: {known}"
            ) from None
        try:
            journal = _read_nofollow(self.journal_path(run_id))
        except FileNotFoundError:
            journal = b""
        try:
            snapshot.decode()
        except UnicodeDecodeError:
            raise StateFileError(f"{path} is not UTF-8 text; the file was left untouched") from None
        return snapshot, journal, str(path)

    def run_ids(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json") if not p.name.startswith("."))


def _holder(fd: int, *, wait: bool = False) -> dict[str, object]:
    """Who holds a lock file, as its holder wrote it; a holder that took the lock an instant
    ago may not have written yet, so with `wait` look again for up to 0.2 s."""
    for _ in range(20 if wait else 1):
        try:
            data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        except ValueError:
            data = {}  # half-written
        if isinstance(data, dict) and data:
            return data
        if wait:
            time.sleep(0.01)
    return {}


def _ensure_dir(directory: Path) -> None:
    """Create `directory`; refuse one that is a symlink (writes would land wherever it points)."""
    directory.mkdir(parents=True, exist_ok=True)
    if directory.is_symlink():
        raise ValueError(f"{directory} is a symlink; the harness writes only into real folders")


def _read_nofollow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MemoryStore(_JournaledStore):
    """Keeps each run as JSON text (a snapshot and journal lines): every load is a real round trip."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: dict[str, str] = {}
        self.journals: dict[str, list[str]] = {}
        self.saves = 0

    def save(self, state: RunState) -> None:
        super().save(state)
        self.saves += 1

    def _write_snapshot(self, run_id: str, text: str) -> None:
        self.snapshots[run_id] = text
        self.journals[run_id] = []

    def _append(self, run_id: str, line: str) -> None:
        self.journals[run_id].append(line)

    def _read(self, run_id: str) -> tuple[bytes, bytes, str]:
        if run_id not in self.snapshots:
            known = ", ".join(self.snapshots) or "none"
            raise FileNotFoundError(f"no saved run {run_id!r}; saved runs: {known}")
        return self.snapshots[run_id].encode(), "".join(self.journals[run_id]).encode(), f"memory:{run_id}"


