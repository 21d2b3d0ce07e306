"""Live updates: the server-sent event streams say `changed` when a run moves, and only then."""

from __future__ import annotations

import threading
import time

import httpx
from ui_support import make_runs, serve_ui, sqlite_pair

from harness.cli import main as harness_main


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
