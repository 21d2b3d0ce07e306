"""The tool ledger: one line per event, read back whole across processes, SIGKILL and torn writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from exitkit.ledger import Ledger

WRITER = """
import sys
from pathlib import Path
from exitkit.ledger import Ledger
ledger = Ledger(Path(sys.argv[1]))
for i in range(int(sys.argv[2])):
    ledger.note("read_file", "start", {"path": sys.argv[3] * 3000, "i": i})
"""


def test_two_processes_appending_at_once_leave_every_line_whole(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text("")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "400", tag]) for tag in "ab"]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    events = Ledger(path).events()
    assert len(events) == 800
    assert {(e.args["path"][0], e.args["i"]) for e in events} == {(t, i) for t in "ab" for i in range(400)}


def test_a_write_cut_short_by_sigkill_loses_no_event_and_keeps_what_it_began(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.note("list_files", "start", {})
    line = json.dumps({"tool": "delete_file", "event": "start", "args": {"path": "x" * 100}, "t": 1.0})
    with ledger.path.open("a") as f:
        f.write(line[:60])  # a large write stops at a page when its process is killed
    ledger.note("delete_file", "start", {"path": "access.log"})
    ledger.note("delete_file", "effect", {"path": "access.log"})
    events = ledger.events()
    assert [(e.tool, e.event) for e in events] == [("list_files", "start"), ("delete_file", "start"),
                                                  ("delete_file", "start"), ("delete_file", "effect")]
    assert events[1].detail == "torn: the write was cut short"
    assert ledger.count("delete_file") == 2


def test_a_torn_last_line_is_read_as_the_event_it_began(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.note("scan_archive", "start", {})
    with ledger.path.open("a") as f:
        f.write('{"tool": "scan_archive", "event": "cancelled", "ar')
    assert [(e.tool, e.event) for e in ledger.events()] == [("scan_archive", "start"),
                                                           ("scan_archive", "cancelled")]
