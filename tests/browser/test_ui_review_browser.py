"""Browser behaviour found in review: what a page does after its own POST answered it."""

from __future__ import annotations

import pytest
from ui_support import make_runs, serve_ui, sqlite_pair

from harness.cli import main as harness_main

pytestmark = pytest.mark.slow


def test_the_page_a_lost_decision_answers_with_keeps_updating_live(browser, tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        browser.get(url + "/runs/d1")
        browser.wait(lambda: browser.find_all("#approve"), what="the approve button")
        # What a page drawn before someone else's change posts: a digest that no longer matches.
        browser.run("document.querySelector('#approve-form input[name=digest]').value = '0'.repeat(64)")
        browser.click("#approve")  # refused: answered with the run page (409)
        browser.wait(lambda: "has changed since this page was drawn" in browser.text("#messages"),
                     what="the refusal")
        harness_main(["--state-dir", str(tmp_path), "--base-url", mock_url, "reject", "d1",
                      "--reason", "decided at the terminal", "--no-resume"])
        assert [r.reason for r in writer.load("d1").rejections] == ["decided at the terminal"]
        decided = browser.wait(lambda: browser.find_all("#decided") and browser.text("#decided"),
                               seconds=10, what="the terminal's decision, brought in live")
        assert "rejected" in decided
        assert browser.run("return location.pathname") == "/runs/d1"  # a reload reads, never re-posts
