"""`harness ui` in a real headless Chromium: list, open, approve, reject with a reason, the
saved runs checked in the store, the hostile-string run inert, a kit report's chart."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from chromium import alert_text, click, console, found, text, wait_for
from selenium.webdriver.common.by import By
from ui_support import hostile_strings, make_runs, save_hostile_run, serve_ui, sqlite_pair, tiny_png, visible

from harness.ui.decide import Resumer

pytestmark = pytest.mark.slow


@contextmanager
def other_origin() -> Iterator[tuple[str, list[str]]]:
    """A loopback server on another port (another origin) that records every request it gets."""
    seen: list[str] = []

    class Record(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            seen.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _deletes(state_dir: Path, run_id: str) -> int:
    events = [json.loads(x) for x in (state_dir / "traces" / f"{run_id}.jsonl").read_text().splitlines()]
    return sum(e["type"] == "tool_start" and e["toolName"] == "delete_file" for e in events)


def test_a_person_approves_one_run_and_rejects_another_in_chromium(browser, tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"), ("d1", "destructive"), ("d2", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    resumer = Resumer(writer, state_dir=tmp_path, base_url=mock_url, log=lambda line: None)
    with serve_ui(reader, writer=writer, resumer=resumer) as url:
        browser.get(url + "/")
        rows = browser.execute_script(
            "return [...document.querySelectorAll('tr[data-run]')].map(r => r.dataset.run)")
        assert rows == ["d2", "d1", "p1"]
        click(browser, 'a[href="/runs/d1"]')
        wait_for(lambda: "delete_file" in text(browser, "#decision"), what="the waiting call")
        assert '"path": "access.log"' in text(browser, "#waiting-args")
        browser.set_window_size(1280, 1500)
        shot = tmp_path / "run-page.png"  # the docs' pictures: test_ui_decision_browser.py
        shot.write_bytes(browser.get_screenshot_as_png())
        assert shot.read_bytes().startswith(b"\x89PNG")

        click(browser, "#approve")
        # Resumed in the UI's process; the live stream brings the finished run in if the
        # redirected page was drawn before it finished.
        answer = wait_for(lambda: text(browser, "#answer"), what="the resumed run's answer")
        assert answer == "Deleted access.log to free space."

        browser.get(url + "/runs/d2")
        browser.find_element(By.CSS_SELECTOR, "#reason").send_keys("keep access.log: the auditors need it")
        click(browser, "#reject")
        answer = wait_for(lambda: text(browser, "#answer"), what="the rejected run's answer")
        assert answer == "I did not delete anything: you declined the deletion."
        resumer.join(timeout=30)

        assert console(browser) == []  # no CSP violation, no script error, nothing failed to load
        browser.get(url + "/")
        make_runs(tmp_path, mock_url, ("p2", "plan"))  # another process's run appears without a reload
        wait_for(lambda: found(browser, 'tr[data-run="p2"]'), what="the new run in the live list")
        assert int(browser.execute_script("return document.body.dataset.updates")) >= 1

    d1, d2 = writer.load("d1"), writer.load("d2")
    assert d1.status == "completed" and d1.meta["last_decision"]["verdict"] == "approved"
    assert not (tmp_path / "sandboxes" / "d1" / "access.log").exists() and _deletes(tmp_path, "d1") == 1
    assert d2.status == "completed"
    assert [r.reason for r in d2.rejections] == ["keep access.log: the auditors need it"]
    assert (tmp_path / "sandboxes" / "d2" / "access.log").exists() and _deletes(tmp_path, "d2") == 0


def test_the_hostile_string_run_renders_inert_in_chromium(browser, tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with other_origin() as (origin, seen):
        strings = hostile_strings(origin) + ['<img src=x onerror="window.pwned=1">',
                                             "<script>window.pwned=2</script>",
                                             f'<a href="javascript:window.pwned=3" id="lure">{origin}</a>']
        save_hostile_run(writer, "h1", strings)
        with serve_ui(reader, writer=writer) as url:
            browser.get(url + "/runs/h1")
            wait_for(lambda: text(browser, "#waiting-args"), what="the waiting call")
            assert alert_text(browser) is None
            assert browser.execute_script("return window.pwned === undefined")
            assert browser.execute_script("return document.scripts.length") == 1
            loaders = "return document.querySelectorAll('img, iframe, link, a#lure').length"
            assert browser.execute_script(loaders) == 0
            transcript = text(browser, "#transcript")
            browser.get(url + "/")
            assert alert_text(browser) is None
            assert console(browser) == []  # escaped, so nothing even tried to run or load
    for s in strings:
        assert visible(s) in transcript, s
    assert seen == []


def test_a_kit_report_shows_its_chart_in_chromium(browser, tmp_path):
    card = tmp_path / "kit" / "card1"
    card.mkdir(parents=True)
    report = "# Exit report card\n\n| case | ours |\n| --- | --- |\n| turn cap | pass |\n\n"
    report += "![overhead](report.png)\n"
    (card / "report.md").write_text(report)
    (card / "report.png").write_bytes(tiny_png())
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, kit_reports=tmp_path / "kit") as url:
        browser.get(url + "/kit")
        click(browser, 'a[href="/kit/card1"]')
        chart = "var i = document.querySelector('img.kit'); return i && i.complete && i.naturalWidth"
        loaded = wait_for(lambda: browser.execute_script(chart), what="the chart")
        assert loaded == 1
        assert "turn cap" in text(browser, "table")
        assert console(browser) == []
