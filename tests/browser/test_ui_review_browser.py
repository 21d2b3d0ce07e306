"""Browser behaviour found in review: a page answering its own POST, and links from elsewhere."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from chromium import click, console, found, text, wait_for
from ui_support import make_runs, serve_ui, sqlite_pair

from harness.cli import main as harness_main

pytestmark = pytest.mark.slow


def test_the_page_a_lost_decision_answers_with_keeps_updating_live(browser, tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        browser.get(url + "/runs/d1")
        wait_for(lambda: found(browser, "#approve"), what="the approve button")
        # Its live stream's first refresh (on connecting) swaps each section whose HTML differs
        # from the server's. A hidden input's value is its attribute, so the altered digest below
        # would be swapped back and the approval would go through: alter it after that refresh.
        wait_for(lambda: browser.execute_script("return document.body.dataset.updates"),
                 what="the page's first live refresh")
        # What a page drawn before someone else's change posts: a digest that no longer matches.
        browser.execute_script(
            "document.querySelector('#approve-form input[name=digest]').value = '0'.repeat(64)")
        click(browser, "#approve")  # refused: answered with the run page (409)
        wait_for(lambda: "has changed since this page was drawn" in text(browser, "#messages"),
                     what="the refusal")
        harness_main(["--state-dir", str(tmp_path), "--base-url", mock_url, "reject", "d1",
                      "--reason", "decided at the terminal", "--no-resume"])
        assert [r.reason for r in writer.load("d1").rejections] == ["decided at the terminal"]
        decided = wait_for(lambda: found(browser, "#decided") and text(browser, "#decided"),
                               seconds=10, what="the terminal's decision, brought in live")
        assert "rejected" in decided
        # A reload reads, never re-posts.
        assert browser.execute_script("return location.pathname") == "/runs/d1"


@contextmanager
def another_site(link: str) -> Iterator[str]:
    """A page on `localhost` (another site than `127.0.0.1`) holding one link, `#go`, to `link`."""
    page = f'<!doctype html><a id="go" href="{link}">open the run</a>'.encode()

    class Serve(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_following_a_link_from_another_site_leaves_the_forms_of_open_pages_valid(browser, tmp_path,
                                                                                   mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"), ("d2", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        browser.get(url + "/runs/d1")
        fields = browser.execute_script(
            "return Object.fromEntries(new FormData(document.forms['approve-form']))")
        with another_site(url + "/runs/d2") as elsewhere:  # a link in a chat or a mail
            browser.get(elsewhere)
            click(browser, "#go")
            wait_for(lambda: found(browser, "#approve"), what="the linked run page")
        # The first tab's form, still open there, is posted as it was drawn.
        browser.execute_script("""
            var form = document.createElement('form');
            form.method = 'post'; form.action = '/runs/d1/approve';
            for (var [name, value] of Object.entries(arguments[0])) {
              var input = document.createElement('input');
              input.type = 'hidden'; input.name = name; input.value = value; form.appendChild(input);
            }
            document.body.appendChild(form); form.submit();""", fields)
        answered = "return location.pathname.startsWith('/runs/d1')"
        wait_for(lambda: browser.execute_script(answered), what="the answer")
        assert found(browser, "#decided"), text(browser, "main")
    assert [a.call_id for a in writer.load("d1").approved] == ["c2"]


def test_chromium_runs_no_script_the_page_did_not_sign_with_its_nonce(browser, tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        browser.get(url + "/runs/p1")
        # Past the escaping: a script element that does reach the DOM, with and without a nonce.
        browser.execute_script("""
            var unsigned = document.createElement('script');
            unsigned.textContent = 'window.ran = (window.ran || 0) + 1';
            document.body.appendChild(unsigned);
            var guessed = document.createElement('script');
            guessed.nonce = 'not-this-pages-nonce'; guessed.textContent = 'window.ran = 2';
            document.body.appendChild(guessed);""")
        ran = browser.execute_script("return window.ran === undefined")
        said = console(browser)
    assert ran
    assert any("Content Security Policy" in line for line in said), said
