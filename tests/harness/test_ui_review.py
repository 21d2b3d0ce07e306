"""Holes found in review, each pinned by the case that showed it."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from ui_support import PageParts, make_runs, save_hostile_run, serve_ui, sqlite_pair

from harness.ui.markup import escape

SMUGGLED = {
    "\U000e0069\U000e0067\U000e006e": "tag characters (text a model reads and a person cannot see)",
    "\u061c": "ARABIC LETTER MARK, a bidirectional control",
    "\u00ad": "SOFT HYPHEN",
    "\ufe01\U000e0101": "variation selectors (bytes hidden after a visible character)",
    "\u3164": "HANGUL FILLER, a letter that draws nothing",
    "\u180e": "MONGOLIAN VOWEL SEPARATOR",
}


def test_hidden_characters_beyond_the_bidi_controls_are_shown_as_escapes():
    for hidden, what in SMUGGLED.items():
        shown = escape(f"rm a{hidden}b")
        assert all(c not in shown for c in hidden), what
        assert all(f"\\u{ord(c):04x}" in shown for c in hidden), what


def test_a_waiting_calls_arguments_show_smuggled_characters_on_the_real_page(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    save_hostile_run(writer, "h1", [f"delete a{h}b" for h in SMUGGLED])
    with serve_ui(reader, writer=writer) as url:
        page = httpx.get(url + "/runs/h1")
    waiting = page.text.split('id="waiting-args">', 1)[1].split("</pre>", 1)[0]
    for hidden, what in SMUGGLED.items():
        assert all(c not in page.text for c in hidden), what
        assert all(f"\\u{ord(c):04x}" in waiting for c in hidden), what


def test_a_decision_the_store_cannot_take_is_a_503_not_a_bad_request(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = PageParts(browser.get("/runs/d1").text).forms()["approve-form"]
        writer.close()  # the database the decisions write to went away
        answer = browser.post("/runs/d1/approve", data=form)
    assert answer.status_code == 503, answer.text
    assert "Traceback" not in answer.text
    assert reader.load("d1").approved == []


def test_an_endless_poll_interval_is_refused_before_the_server_starts(tmp_path):
    for given in ("inf", "1e300"):
        argv = ["--state-dir", str(tmp_path), "ui", "--port", "0", "--poll-seconds", given]
        # Before the check, the server started and served streams that could never send.
        ui = subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True, text=True,
                            timeout=20)
        assert ui.returncode == 2, ui.stdout + ui.stderr
        assert "--poll-seconds" in ui.stderr and "harness ui: http" not in ui.stdout


@pytest.mark.parametrize("cost", ["NaN", "Infinity", "1e999", "true"])
def test_a_trace_with_a_cost_that_is_not_a_number_still_draws_the_run_page(tmp_path, mock_url, cost):
    make_runs(tmp_path, mock_url, ("p1", "plan"))
    trace = tmp_path / "traces" / "p1.jsonl"
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert sum(e["type"] == "turn" for e in lines) >= 2
    # Python's json writes NaN and Infinity, and reads them back: a trace file may hold them.
    trace.write_text("".join(json.dumps(e).replace(f'"costUsd": {e["costUsd"]}', f'"costUsd": {cost}') + "\n"
                             if e["type"] == "turn" else json.dumps(e) + "\n" for e in lines))
    assert cost in trace.read_text()
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        page = httpx.get(url + "/runs/p1")
    assert page.status_code == 200, page.text[:300]
    chart = page.text.split('<svg class="chart"', 1)[1].split("</svg>", 1)[0].lower()
    assert "nan" not in chart and "inf" not in chart
