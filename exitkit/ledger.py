"""The kit's tool ledger: one JSON line per tool event, in a file, so it survives processes.

An approval resumed in a new process, or a process that SIGKILLs itself right after a side
effect, still leaves its lines here: each event is one `write` to a file opened for appending,
done before the tool returns (or kills its process). Events: `start` when the tool body is
entered, `effect` once a side effect is done, `ok` / `error` when it returns or raises,
`cancelled` when its task was cancelled.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Event:
    tool: str
    event: str
    args: dict[str, Any]
    t: float
    """`time.time()`, comparable with the journal's `started`."""
    pid: int
    detail: str = ""

    def is_(self, tool: str, event: str = "start") -> bool:
        return self.tool == tool and self.event == event


@dataclass(frozen=True)
class Ledger:
    path: Path

    def note(self, tool: str, event: str, args: dict[str, Any], detail: str = "") -> None:
        line = json.dumps({"tool": tool, "event": event, "args": args, "t": time.time(), "pid": os.getpid(),
                           "detail": detail[:500]}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def events(self) -> list[Event]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            data = json.loads(line)
            out.append(Event(tool=data["tool"], event=data["event"], args=data["args"], t=data["t"],
                             pid=data["pid"], detail=data.get("detail", "")))
        return out

    def count(self, tool: str, event: str = "start", **args: Any) -> int:
        return sum(e.is_(tool, event) and all(e.args.get(k) == v for k, v in args.items())
                   for e in self.events())
