"""Where runs are kept: a tiny protocol, a file store (atomic), and an in-memory one.

`FileStore.save` never leaves a half-written file: it writes `<id>.json.tmp`, fsyncs it,
`os.replace`s it over `<id>.json` and fsyncs the folder, so a crash at any instant leaves
either the previous version or the new one. `load` refuses corrupt, foreign and
unknown-version files with a `StateFileError` and never modifies them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from harness.state import RunState, StateFileError, from_json, to_json

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Store(Protocol):
    def save(self, state: RunState) -> None: ...
    def load(self, run_id: str) -> RunState: ...


def _check_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r} is not a safe file name (letters, digits, . _ -)")
    return run_id


class FileStore:
    """One JSON file per run in `directory`."""

    def __init__(self, directory: str | os.PathLike[str], *,
                 checkpoint: Callable[[str], None] | None = None) -> None:
        self.directory = Path(directory)
        self.checkpoint = checkpoint
        """Test hook: called with "mid_save" after the temp file is durable, before the rename."""

    def path(self, run_id: str) -> Path:
        return self.directory / f"{_check_id(run_id)}.json"

    def save(self, state: RunState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.path(state.run_id)
        tmp = final.with_name(final.name + ".tmp")
        data = to_json(state).encode()
        # A file object writes every byte or raises (a bare os.write may write part of it, e.g.
        # on a full disk, and the short file would then replace the good one).
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if self.checkpoint:
            self.checkpoint("mid_save")
        os.replace(tmp, final)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def load(self, run_id: str) -> RunState:
        path = self.path(run_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            known = ", ".join(self.run_ids()) or "none"
            raise FileNotFoundError(
                f"no saved run {run_id!r} in {self.directory}; saved runs: {known}"
            ) from None
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise StateFileError(f"{path} is not UTF-8 text; the file was left untouched") from None
        state = from_json(text, source=str(path))
        if state.run_id != run_id:
            raise StateFileError(f"{path} holds run {state.run_id!r}, not {run_id!r}")
        return state

    def run_ids(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json"))


class MemoryStore:
    """Keeps each run as its JSON text, so every save/load is a real round trip."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}
        self.saves = 0

    def save(self, state: RunState) -> None:
        self.saved[state.run_id] = to_json(state)
        self.saves += 1

    def load(self, run_id: str) -> RunState:
        if run_id not in self.saved:
            raise FileNotFoundError(f"no saved run {run_id!r}; saved runs: {', '.join(self.saved) or 'none'}")
        return from_json(self.saved[run_id], source=f"memory:{run_id}")
