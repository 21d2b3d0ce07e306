"""The decision screen in a real headless Chromium, measured against its viewport: what a person
must read before deciding (the task, the tool and why it asks, where, what Approve does, every
argument) and the two buttons are on the first screen, a padded argument included; the buttons
stay in view however far the page is scrolled. `make ui-screenshot` retakes the docs' pictures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chromium import click, found, wait_for
from ui_support import FILLER, PADDED, make_runs, one_call, scripted_mock, serve_ui, sqlite_pair

ROOT = Path(__file__).resolve().parents[2]
FIRST_SCREEN = (1280, 800)
"""A laptop's browser window: what a person sees before scrolling."""
MUST_SEE = ("#task", "#tool", "#why", "#where", "#next", "#approve", "#reject", "#reason")

pytestmark = pytest.mark.slow


def _outside_the_first_screen(browser, selectors) -> dict[str, dict]:
    """Each selector whose element is not wholly inside the viewport, with where it is."""
    where = browser.execute_script("""
        var out = {};
        for (var css of arguments[0]) {
          var el = document.querySelector(css);
          if (!el) { out[css] = 'missing'; continue; }
          var r = el.getBoundingClientRect();
          if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth || !r.height) {
            out[css] = {top: r.top, bottom: r.bottom, viewport: [innerWidth, innerHeight]};
          }
        }
        return out;""", list(selectors))
    return where


def _shot(browser, name: str, tmp_path: Path) -> None:
    """The docs' picture under `make ui-screenshot` (UI_SCREENSHOT=1), else a file of the test's own."""
    path = ROOT / "docs" / name if os.environ.get("UI_SCREENSHOT") == "1" else tmp_path / name
    path.write_bytes(browser.get_screenshot_as_png())
    assert path.read_bytes().startswith(b"\x89PNG")


def _first_screen(browser, url: str) -> None:
    width, height = FIRST_SCREEN  # the viewport itself, whatever the window around it takes
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    browser.get(url)
    wait_for(lambda: found(browser, "#approve"), what="the decision screen")
    assert browser.execute_script("return [innerWidth, innerHeight, scrollY]") == [width, height, 0]


def test_the_decision_screen_answers_what_to_what_where_and_why_without_scrolling(browser, tmp_path,
                                                                                   mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        _first_screen(browser, url + "/runs/d1")
        assert _outside_the_first_screen(browser, [*MUST_SEE, '[data-arg="path"]']) == {}
        _shot(browser, "ui-run-page.png", tmp_path)


def test_a_padded_argument_leaves_path_and_the_buttons_on_the_first_screen(browser, tmp_path):
    with scripted_mock(PADDED) as mock:
        make_runs(tmp_path, mock, ("x1", "padded"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        _first_screen(browser, url + "/runs/x1")
        assert _outside_the_first_screen(browser, ["#approve", "#reject", '[data-arg="path"]']) == {}
        assert _outside_the_first_screen(browser, [*MUST_SEE, '[data-arg="filler"]']) == {}
        _shot(browser, "ui-padded-call.png", tmp_path)
        click(browser, '[data-arg="filler"] summary')  # all 100,000 characters, on request
        shown = browser.execute_script("return document.querySelector('[data-arg=\"filler\"]').innerText")
        assert FILLER in shown
        browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
        assert browser.execute_script("return scrollY") > 10_000
        assert _outside_the_first_screen(browser, ["#approve", "#reject", "#reason"]) == {}


def test_a_padded_argument_name_leaves_path_and_the_buttons_on_the_first_screen(browser, tmp_path):
    # The model writes the key too: a 100,000-character name before `path` is folded like a value.
    padded_key = one_call("padded_key",
                          {"name": "delete_file", "arguments": {FILLER: 1, "path": "access.log"}})
    with scripted_mock(padded_key) as mock:
        make_runs(tmp_path, mock, ("k1", "padded_key"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        _first_screen(browser, url + "/runs/k1")
        assert _outside_the_first_screen(browser, [*MUST_SEE, '[data-arg="path"]']) == {}
        assert "100,000 characters" in browser.execute_script(
            "return document.querySelector('#waiting-args').innerText")


def test_many_padding_arguments_leave_path_and_the_buttons_on_the_first_screen(browser, tmp_path):
    # Sixty short keys the tool does not take, written before the one it reads.
    padded = {**{f"pad{i}": i for i in range(60)}, "path": "access.log"}
    with scripted_mock(one_call("many", {"name": "delete_file", "arguments": padded})) as mock:
        make_runs(tmp_path, mock, ("m1", "many"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        _first_screen(browser, url + "/runs/m1")
        assert _outside_the_first_screen(browser, [*MUST_SEE, '[data-arg="path"]']) == {}
