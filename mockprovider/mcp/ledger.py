"""The effects ledger: one file per side effect a tool ran, in a folder the user names.

A test counts how many times an effect ran — across sessions, server processes (a stdio server
per client, several workers, a server restarted between two halves of a run) and crashes of the
agent — by reading the folder. The journal cannot answer that: it is per process, in memory,
and bounded (its oldest entries drop out). A file per effect needs no lock between processes:
each is written under a temporary name, flushed to disk and renamed into place, so a reader sees
whole records only, and a crash mid-write leaves at most a temporary file that readers skip.

Names come from a hash of what was done and a random part, never from what a client sent, so
nothing a client sends can name a path outside the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SUFFIX = ".effect.json"


@dataclass(frozen=True, kw_only=True)
class Effect:
    """One run of a tool's side effect."""

    tool: str
    arguments: Mapping[str, Any]
    key: str | None = None
    """The idempotency key the client sent with the call (`_meta.idempotencyKey`), if any."""
    session: str | None = None
    """The MCP session it ran in (None over stdio)."""
    scenario: str | None = None
    """The scenario whose script ran it (None for a tool given in code)."""

    def identity(self) -> str:
        """The same for the same tool, arguments and key: what 'the same effect' means."""
        text = json.dumps([self.tool, self.arguments, self.key], sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class LedgerError(ValueError):
    """A folder that cannot hold the ledger; the message names it and why."""


class Ledger:
    """The effects recorded in `folder` (created when missing), by any process."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        problem = f"{self.folder}: cannot keep the MCP effects ledger there"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LedgerError(f"{problem} ({e.strerror or e})") from None
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise LedgerError(f"{problem} (not writable)")

    def record(self, effect: Effect) -> None:
        body = json.dumps(asdict(effect), ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
        name = f"{effect.identity()[:16]}-{uuid.uuid4().hex}"
        temporary = self.folder / f".{name}.tmp"
        with open(temporary, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, self.folder / f"{name}{SUFFIX}")
        _sync_folder(self.folder)

    def effects(self, tool: str | None = None) -> list[Effect]:
        """Every effect recorded so far (in no particular order), or only `tool`'s."""
        found = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            try:
                fields = json.loads(path.read_bytes())
                effect = Effect(**fields)
            except (OSError, ValueError, TypeError):
                continue  # not a record of ours; the folder is the user's
            if tool is None or effect.tool == tool:
                found.append(effect)
        return found

    def count(self, tool: str, arguments: Mapping[str, Any] | None = None, key: str | None = None) -> int:
        """How many times `tool` ran its effect: with these `arguments` and this `key`, when given."""
        return sum(1 for effect in self.effects(tool) if (arguments is None or effect.arguments == arguments)
                   and (key is None or effect.key == key))


def _sync_folder(folder: Path) -> None:
    # The rename is durable only once the folder's entry is on disk too.
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
