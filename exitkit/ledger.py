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
import re
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


TORN = "torn: the write was cut short"
_START = '{"tool": '
_HEAD = re.compile(r'\{"tool": ("(?:[^"\\]|\\.)*"), "event": ("(?:[^"\\]|\\.)*")')


def _parse(line: str, t: float) -> list[Event]:
    """The events on one line. A write cut short (SIGKILL stops a large write at a page) leaves a
    fragment the next write continues on the same line: the fragment still names its tool and
    event (they are written first), and what follows it is a whole record."""
    out = []
    while line:
        try:
            data = json.loads(line)
        except ValueError:
            pass
        else:
            return [*out, Event(tool=data["tool"], event=data["event"], args=data["args"], t=data["t"],
                                pid=data["pid"], detail=data.get("detail", ""))]
        if head := _HEAD.match(line):
            out.append(Event(tool=json.loads(head[1]), event=json.loads(head[2]), args={}, t=t, pid=0,
                             detail=TORN))
        # Inside a JSON string a quote is escaped, so `{"tool": ` can only begin a record.
        if (cut := line.find(_START, 1)) < 0:
            return out
        line = line[cut:]
    return out


@dataclass(frozen=True)
class Ledger:
    path: Path

    def note(self, tool: str, event: str, args: dict[str, Any], detail: str = "") -> None:
        line = json.dumps({"tool": tool, "event": event, "args": args, "t": time.time(), "pid": os.getpid(),
                           "detail": detail[:500]}) + "\n"
        # Never through a symlink a run put in its place: the kit's own process writes here too.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def events(self) -> list[Event]:
        if not self.path.exists():
            return []
        out: list[Event] = []
        for line in self.path.read_text(errors="replace").splitlines():
            out += _parse(line, out[-1].t if out else 0.0)
        return out

    def count(self, tool: str, event: str = "start", **args: Any) -> int:
        return sum(e.is_(tool, event) and all(e.args.get(k) == v for k, v in args.items())
                   for e in self.events())
