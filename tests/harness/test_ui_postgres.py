"""The UI over PostgreSQL, every part its own process: a worker stops a run for approval, the UI
(`harness ui --store postgresql://…`) records the decision, two workers race to resume it, and
the file is deleted exactly once."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import httpx
from ui_support import PageParts

from harness import open_store


def _harness(*argv: str, cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_decision_made_in_the_ui_over_postgres_is_resumed_once_by_two_racing_workers(pg_url, mock_url,
                                                                                        tmp_path):
    worker, desk = tmp_path / "worker", tmp_path / "desk"
    worker.mkdir(), desk.mkdir()
    common = ("--store", pg_url, "--base-url", mock_url)
    first = _harness(*common, "--state-dir", str(worker), "run", "--scenario", "destructive",
                     "--run-id", "d1", cwd=worker)
    assert first.wait(timeout=60) == 3, first.communicate()
    first.stdout.close(), first.stderr.close()

    ui = _harness(*common, "--state-dir", str(desk), "ui", "--port", "0", cwd=desk)
    try:
        url = re.match(r"harness ui: (http://\S+)/", ui.stdout.readline()).group(1)
        with httpx.Client(base_url=url, timeout=30) as browser:
            page = browser.get("/runs/d1")
            assert "postgresql://" in browser.get("/").text
            answer = browser.post("/runs/d1/approve", data=PageParts(page.text).forms()["approve-form"])
    finally:
        ui.send_signal(signal.SIGINT)
        ui.communicate(timeout=20)
    assert answer.status_code == 303

    racers = [_harness(*common, "--state-dir", str(desk / f"w{i}"), "resume", "d1", cwd=desk) for i in (1, 2)]
    codes = sorted(r.wait(timeout=60) for r in racers)
    for r in racers:
        r.communicate()
    assert codes[0] == 0 and codes[1] in (2, 4)  # the loser was refused, or found the run finished

    store = open_store(pg_url)
    try:
        state = store.load("d1")
    finally:
        store.close()
    assert state.status == "completed" and state.answer == "Deleted access.log to free space."
    assert "harness ui (process" in state.meta["last_decision"]["by"]
    assert not (worker / "sandboxes" / "d1" / "access.log").exists()
    events = [json.loads(x) for x in (worker / "traces" / "d1.jsonl").read_text().splitlines()]
    assert sum(e["type"] == "tool_start" and e["toolName"] == "delete_file" for e in events) == 1
    assert not (desk / "sandboxes").exists()
