"""Live updates: the server-sent event streams say `changed` when a run moves, and only then."""

from __future__ import annotations

import re
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack

import httpx
from ui_support import make_runs, serve_ui, sqlite_pair

from harness import SQLiteStore
from harness.cli import main as harness_main
from harness.ui.live import MAX_STREAMS_PER_CLIENT


def _events(url: str, path: str, until: threading.Event, seconds: float = 15,
            listening: threading.Event | None = None) -> list[str]:
    """The SSE event names received on `path`, until `changed` arrives after `until` is set, or a
    second after `until` is set, or `seconds`. `listening` is set once the stream has read the
    state it compares against (its first idle comment), so a change made after it is news."""
    names: list[str] = []
    deadline = time.monotonic() + seconds
    with httpx.stream("GET", url + path, timeout=seconds) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():  # an idle comment arrives every poll, so this loop turns
            if line.startswith("event: "):
                names.append(line.removeprefix("event: "))
            elif line.startswith("retry:"):
                names.append("retry")
            elif line.startswith(": idle") and listening is not None:
                listening.set()
            if until.is_set():
                if "changed" in names:
                    break
                deadline = min(deadline, time.monotonic() + 1.0)
            if time.monotonic() > deadline:
                break
    return names


def test_a_run_page_stream_says_changed_when_the_run_moves_on(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    decided, listening = threading.Event(), threading.Event()

    def decide_later() -> None:
        listening.wait(10)
        harness_main(["--state-dir", str(tmp_path), "--base-url", mock_url, "approve", "d1"])
        decided.set()

    with serve_ui(reader, writer=writer, poll_seconds=0.05) as url:
        worker = threading.Thread(target=decide_later)
        worker.start()
        names = _events(url, "/runs/d1/events", decided, listening=listening)
        worker.join()
    assert names[0] == "retry" and "changed" in names
    assert reader.load("d1").status == "completed"


def test_the_list_stream_says_changed_when_a_run_appears_and_is_quiet_otherwise(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    added, listening = threading.Event(), threading.Event()
    with serve_ui(reader, writer=writer, poll_seconds=0.05) as url:
        quiet = _events(url, "/events", threading.Event(), seconds=0.5)  # ten polls, nothing new

        def add_later() -> None:
            listening.wait(10)
            make_runs(tmp_path, mock_url, ("p2", "plan"))
            added.set()

        worker = threading.Thread(target=add_later)
        worker.start()
        names = _events(url, "/events", added, listening=listening)
        worker.join()
        bad = httpx.get(url + "/events", params={"status": "nonsense"})
    assert quiet == ["retry"]
    assert "changed" in names
    assert bad.status_code == 400


def test_the_pages_script_runs_only_under_the_nonce_and_reads_its_stream_from_the_page(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        run_page = httpx.get(url + "/runs/p1").text
        listing = httpx.get(url + "/", params={"status": "completed"}).text
    assert 'data-live="/runs/p1/events"' in run_page
    assert 'data-live="/events?status=completed"' in listing
    assert "new EventSource(source.dataset.live)" in run_page


class CountingStore(SQLiteStore):
    """The pages' reader, counting what the live streams ask of it."""

    def __init__(self, path) -> None:
        super().__init__(path)
        self.calls: Counter[str] = Counter()

    def list_runs(self, status=None):
        self.calls["list_runs"] += 1
        return super().list_runs(status)

    def load(self, run_id):
        self.calls["load"] += 1
        return super().load(run_id)

    def summary(self, run_id):
        self.calls["summary"] += 1
        return super().summary(run_id)

    def change_marker(self, status=None):
        self.calls["change_marker"] += 1
        return super().change_marker(status)


def test_live_streams_read_one_small_row_per_poll_shared_by_every_open_page(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"), ("d1", "destructive"))
    reader, poll = CountingStore(tmp_path / "harness.db"), 0.05
    with serve_ui(reader, writer=SQLiteStore(tmp_path / "harness.db"), poll_seconds=poll) as url:
        with ExitStack() as open_pages:
            for path in ["/events"] * 4 + ["/runs/d1/events"] * 4:
                response = open_pages.enter_context(httpx.stream("GET", url + path, timeout=10))
                assert response.status_code == 200
            started = time.monotonic()
            time.sleep(40 * poll)
            polls = (time.monotonic() - started) / poll
    assert reader.calls["list_runs"] == 0 and reader.calls["load"] == 0  # never every run, never a whole run
    # One read per poll for each thing watched (the list, one run), however many pages watch it.
    assert reader.calls["change_marker"] <= polls + 3, reader.calls
    assert reader.calls["summary"] <= polls + 3, reader.calls


def test_one_client_holds_at_most_its_share_of_live_streams_and_pages_still_load(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url, ExitStack() as open_pages:
        codes = [open_pages.enter_context(httpx.stream("GET", url + "/events", timeout=10)).status_code
                 for _ in range(MAX_STREAMS_PER_CLIENT + 1)]
        refused = httpx.get(url + "/runs/p1/events", timeout=10)
        page = httpx.get(url + "/", timeout=10)
        open_pages.close()  # the pages go away: their places come back

        def reopened() -> int:
            with httpx.stream("GET", url + "/events", timeout=10) as again:
                return again.status_code

        deadline = time.monotonic() + 10
        while (again := reopened()) != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
    assert codes == [200] * MAX_STREAMS_PER_CLIENT + [429]
    assert again == 200
    assert refused.status_code == 429 and "live streams" in refused.text
    assert refused.headers["connection"] == "close" and int(refused.headers["retry-after"]) > 0
    assert page.status_code == 200


def _limited(files: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))


def test_a_ui_near_its_file_limit_keeps_answering_while_one_client_opens_streams_by_the_hundred(tmp_path):
    """`harness ui` itself, allowed 256 open files; a client opens 400 streams and keeps them."""
    argv = [sys.executable, "-m", "harness", "--state-dir", str(tmp_path), "ui", "--port", "0"]
    ui = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_limited(256))
    held: list[socket.socket] = []
    try:
        port = int(re.match(r"harness ui: http://127.0.0.1:(\d+)/", ui.stdout.readline()).group(1))
        for _ in range(400):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            held.append(s)
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
    finally:
        for s in held:
            s.close()
        ui.send_signal(signal.SIGINT)
        ui.communicate(timeout=20)
    assert page.status_code == 200
