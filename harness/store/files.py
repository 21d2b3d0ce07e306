"""Reading the old file format (`<id>.json` snapshot + `<id>.journal`) for `harness import-state`.

Runs were once saved as a snapshot and a journal of records per run; this module only reads
such a folder, so `harness import-state DIR` can move its runs into a database. It never
writes there. Every file is opened without following symlinks and without blocking, and must
be a regular file: a FIFO or a device in a run's place is refused, not waited on.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from harness.codec import StateFileError, check_depth, from_data
from harness.state import RUN_ID, RunState

_APPEND = ("messages", "turn_usage", "tool_runs", "rejections")
MAX_FILE_BYTES = 256 * 1024 * 1024


def read_regular(path: Path) -> bytes:
    """The bytes of `path`, refusing anything but a regular file, without blocking on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StateFileError(f"{path} is not a regular file; it was left untouched")
        if info.st_size > MAX_FILE_BYTES:
            raise StateFileError(f"{path} is {info.st_size} bytes, over the {MAX_FILE_BYTES}-byte limit")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _apply(data: dict, rec: dict) -> None:
    if not (isinstance(rec.get("set"), dict) and isinstance(rec.get("add"), dict)
            and rec["add"].keys() <= set(_APPEND)):
        raise ValueError("unexpected keys")
    data.update(rec["set"])
    for f, items in rec["add"].items():
        if not isinstance(items, list) or not isinstance(data.get(f), list):
            raise TypeError(f"add.{f} is not a list")
        data[f].extend(items)
    if not isinstance(added := rec.get("cache_add", {}), dict) or not isinstance(data.get("cache"), dict):
        raise TypeError("cache_add is not an object")
    data["cache"].update(added)


def read_run(directory: Path, run_id: str) -> RunState:
    """One run of an old state folder: its snapshot with its journal's records replayed."""
    path = directory / f"{run_id}.json"
    snapshot = read_regular(path)
    try:
        journal = read_regular(directory / f"{run_id}.journal")
    except FileNotFoundError:
        journal = b""
    check_depth(snapshot, str(path))
    try:
        data = json.loads(snapshot)
    except ValueError as e:
        raise StateFileError(f"{path} is not valid JSON ({e}); the file was left untouched") from None
    if not isinstance(data, dict):
        return from_data(data, source=str(path))
    generation, seq = data.pop("journal_generation", ""), 0
    for n, line in enumerate(journal.split(b"\n")[:-1], 1):  # after the last newline: a torn write
        try:
            check_depth(line, f"{path} journal line {n}")
            rec = json.loads(line)
            if not isinstance(rec, dict) or rec.get("gen") != generation:
                continue  # written before this snapshot, which already holds it
            if rec.get("seq") != seq + 1:
                raise ValueError(f"record {rec.get('seq')!r} follows {seq}")
            _apply(data, rec)
            seq += 1
        except (ValueError, AttributeError, TypeError, KeyError) as e:
            if isinstance(e, StateFileError):
                raise
            raise StateFileError(
                f"{path}: journal line {n} is damaged ({e}); the files were left untouched"
            ) from None
    state = from_data(data, source=str(path))
    if state.run_id != run_id:
        raise StateFileError(f"{path} holds run {state.run_id!r}, not {run_id!r}")
    return state


def run_ids(directory: Path) -> Iterator[str]:
    """The runs an old state folder holds (snapshots whose name is a valid run id)."""
    for p in sorted(directory.glob("*.json")):
        if not p.name.startswith(".") and RUN_ID.fullmatch(p.stem):
            yield p.stem
