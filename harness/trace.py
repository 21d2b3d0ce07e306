"""The trace: one JSON object per event, the run id on every line.

Events (field names as the chapter prints them):
    turn               turn, prompt_tokens, completion_tokens, total_tokens, costUsd (cumulative), finish;
                       and cached_tokens, cache_write_tokens, reasoning_tokens when the provider
                       reported any (so a line without them reads as the chapter prints it)
    tool_start         toolName, args (the JSON string), callId
    tool_progress      toolName, label
    tool_result        toolName, ms, ok
    approval_required  toolName, args, callId
    run_stopped        status, reason, turns, costUsd
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol


class TraceSink(Protocol):
    def emit(self, event: dict[str, Any]) -> None: ...


def event(run_id: str, type: str, **fields: Any) -> dict[str, Any]:
    return {"runId": run_id, "type": type, **fields}


def usage_details(usage: Any) -> dict[str, int]:
    """The parts of a turn's usage worth a trace field: those the provider reported as non-zero."""
    names = ("cached_tokens", "cache_write_tokens", "reasoning_tokens")
    return {n: getattr(usage, n) for n in names if getattr(usage, n)}


def money(usd: float) -> float:
    """Dollars without float noise (0.000684, not 0.0006839999999999999)."""
    return round(usd, 9)


def line(e: dict[str, Any]) -> str:
    return json.dumps(e, ensure_ascii=False, separators=(",", ":"))


class JsonlTrace:
    """Appends to a file; each line is written and flushed on its own, so processes can share it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.parent.is_symlink():
            raise ValueError(f"trace folder {self.path.parent} is a symlink; refusing to write through it")

    def emit(self, event: dict[str, Any]) -> None:
        # O_NOFOLLOW: a symlink planted at the trace's name is refused, never written through.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line(event) + "\n")


class MemoryTrace:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def lines(self) -> list[str]:
        return [line(e) for e in self.events]

    def of_type(self, type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type]


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8") if Path(path).exists() else ""
    return [json.loads(x) for x in text.splitlines() if x.strip()]
