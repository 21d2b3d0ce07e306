"""The UI's pages over SQLite, served for real: the list, a run, escaping, headers, errors."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from ui_support import (
    PageParts,
    hostile_strings,
    make_runs,
    save_hostile_run,
    serve_ui,
    sqlite_pair,
    visible,
)

import harness.ui
from harness.cli import main as harness_main
from harness.ui import runs_page

ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "header", "a", "span", "main", "h1", "h2",
                "h3", "p", "nav", "table", "thead", "tbody", "tr", "th", "td", "code", "div", "section",
                "article", "pre", "b", "form", "input", "button", "label", "br", "textarea", "script", "svg",
                "g", "rect", "line", "polyline", "circle", "text", "ul", "li", "i", "dl", "dt", "dd",
                "details", "summary"}


@pytest.fixture
def runs_dir(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"), ("d1", "destructive"), ("r1", "runaway"))
    return tmp_path


def test_the_list_shows_status_turns_cost_and_the_waiting_call_newest_first(runs_dir):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        page = httpx.get(url + "/")
    assert page.status_code == 200
    rows = re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', page.text)
    assert [r[0] for r in rows] == ["r1", "d1", "p1"]
    d1 = dict(rows)["d1"]
    assert "interrupted" in d1 and "<code>c2</code> delete_file" in d1 and "$0.00" in d1
    assert re.search(r'<td class="num">2</td>', d1)
    r1 = dict(rows)["r1"]
    assert "max_turns_exceeded" in r1 and re.search(r'<td class="num">20</td>', r1)


def test_a_long_list_draws_the_newest_runs_and_says_how_many_it_left_out(runs_dir, monkeypatch):
    monkeypatch.setattr(runs_page, "MAX_LISTED", 2)
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        page = httpx.get(url + "/").text
    assert re.findall(r'<tr data-run="([^"]+)"', page) == ["r1", "d1"]
    assert "The 2 newest of 3 runs are shown" in page


def test_the_list_filters_by_status_and_refuses_an_unknown_one(runs_dir):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        waiting = httpx.get(url + "/", params={"status": "interrupted"})
        done = httpx.get(url + "/", params={"status": "completed"})
        bad = httpx.get(url + "/", params={"status": "<b>done</b>"})
    assert re.findall(r'<tr data-run="([^"]+)"', waiting.text) == ["d1"]
    assert re.findall(r'<tr data-run="([^"]+)"', done.text) == ["p1"]
    assert bad.status_code == 400 and "unknown status" in bad.text and "<b>done</b>" not in bad.text


def test_a_run_page_shows_transcript_tool_runs_stop_chart_and_trace(runs_dir):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        plan = httpx.get(url + "/runs/p1").text
        waiting = httpx.get(url + "/runs/d1").text
    assert 'data-call="c1"' in plan and "<b>list_files</b>" in plan and "<b>read_file</b>" in plan
    assert "result of call <code>c2</code> (read_file)" in plan
    assert '<pre id="answer">errors.log mentions a timeout: worker 7 timed out after 30000 ms.</pre>' in plan
    assert len(re.findall(r'<rect class="in"', plan)) == 3  # one bar per turn
    assert "<polyline class=\"cost\"" in plan
    trace_types = re.findall(r"<tr><td>(\w+)</td><td><pre>", plan)
    assert trace_types == ["turn", "tool_start", "tool_result", "turn", "tool_start", "tool_result", "turn",
                           "run_stopped"]
    assert "".join(PageParts(waiting).by_arg["path"]) == '"path": "access.log"'
    assert 'id="approve"' in waiting and 'id="reject"' in waiting
    forms = PageParts(waiting).forms()
    assert forms["approve-form"]["call_id"] == "c2" and len(forms["approve-form"]["digest"]) == 64


def test_every_hostile_string_renders_as_text_and_nothing_else_enters_the_page(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    strings = hostile_strings("http://127.0.0.1:9")
    save_hostile_run(writer, "h1", strings)
    with serve_ui(reader, writer=writer) as url:
        response = httpx.get(url + "/runs/h1")
        listing = httpx.get(url + "/").text
    assert response.status_code == 200
    parts = PageParts(response.text)
    assert {tag for tag, _ in parts.tags} <= ALLOWED_TAGS
    assert all(not name.startswith("on") for _, attrs in parts.tags for name in attrs)
    assert all(not (attrs.get("href") or attrs.get("src") or "").lower().startswith(("javascript:", "http"))
               for _, attrs in parts.tags)
    nonce = re.search(r"'nonce-([^']+)'", response.headers["content-security-policy"]).group(1)
    assert parts.scripts == [{"nonce": nonce}]
    text = "".join(parts.text)
    for s in strings:
        assert visible(s) in text, s
    for control in ("\u202e", "\u2066", "\u200b", "\x1b"):
        assert control not in response.text
    assert "h1" in listing and "&lt;1&gt;" in listing  # the waiting call id, escaped in the list too
    assert "<script>alert" not in response.text + listing


def test_a_trace_line_holding_half_a_surrogate_pair_is_shown_escaped_not_a_server_error(runs_dir):
    trace = runs_dir / "traces" / "p1.jsonl"
    trace.write_text(trace.read_text() + '{"runId": "p1", "type": "note", "label": "half \\ud800 pair"}\n')
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        page = httpx.get(url + "/runs/p1")
    assert page.status_code == 200 and "half \\ud800 pair" in "".join(PageParts(page.text).text)


def test_every_response_carries_a_nonce_csp_and_the_safety_headers(runs_dir):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        first, second = httpx.get(url + "/runs/p1"), httpx.get(url + "/runs/p1")
        missing = httpx.get(url + "/runs/nope")
    policy = first.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert re.search(r"script-src 'nonce-[^']{16,}';", policy) and "unsafe-inline" not in policy
    assert policy != second.headers["content-security-policy"]  # a fresh nonce per response
    for r in (first, missing):
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "same-origin"
    assert missing.status_code == 404 and "no saved run &#x27;nope&#x27;" in missing.text


def test_a_bad_run_id_and_a_damaged_run_are_clear_errors_and_the_run_is_left_alone(runs_dir):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with writer._transaction() as tx:
        tx.execute("UPDATE runs SET head = '{not json' WHERE run_id = 'p1'")
    with serve_ui(reader, writer=writer) as url:
        bad_id = httpx.get(url + "/runs/..%2F..%2Fetc")
        damaged = httpx.get(url + "/runs/p1")
    assert bad_id.status_code == 404
    assert damaged.status_code == 422 and "nothing was changed" in damaged.text
    with writer._transaction() as tx:
        assert tx.fetchall("SELECT head FROM runs WHERE run_id = 'p1'") == [("{not json",)]


def test_one_damaged_runs_row_is_named_and_the_list_shows_every_other_run(runs_dir):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    with writer._transaction() as tx:
        tx.execute("UPDATE runs SET turns = 'many' WHERE run_id = 'd1'")
    with serve_ui(reader, writer=writer) as url:
        page = httpx.get(url + "/")
        api = httpx.get(url + "/api/runs")
    assert page.status_code == 200
    assert [r for r in re.findall(r'<tr data-run="([^"]+)">', page.text)] == ["r1", "p1"]
    assert "the runs row of &#x27;d1&#x27; is damaged" in page.text
    assert api.status_code == 200 and [r["run_id"] for r in api.json()] == ["p1", "r1"]
    assert api.headers["x-damaged-runs"] == "1"


def test_the_json_api_gives_what_harness_list_and_show_json_print(runs_dir, capsys):
    reader, writer = sqlite_pair(runs_dir / "harness.db")
    argv = ["--state-dir", str(runs_dir)]
    with serve_ui(reader, writer=writer) as url:
        listed = httpx.get(url + "/api/runs", params={"status": "interrupted"}).json()
        shown = httpx.get(url + "/api/runs/d1").json()
        missing = httpx.get(url + "/api/runs/nope")
    capsys.readouterr()
    harness_main([*argv, "list", "--status", "interrupted", "--json"])
    assert listed == [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    harness_main([*argv, "show", "d1", "--json"])
    assert shown == json.loads(capsys.readouterr().out)
    assert shown["waiting"]["call_id"] == "c2"
    assert missing.status_code == 404 and "no saved run" in missing.json()["error"]


def test_a_run_holding_half_a_surrogate_pair_is_served_by_the_api_and_the_page_not_called_missing(
        tmp_path, capsys):
    # A provider's JSON may carry "\ud800" escapes; the run's trace path holds one here too.
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    save_hostile_run(writer, "h1", ["half \ud800 pair", "a tool"])
    with serve_ui(reader, writer=writer) as url:
        shown = httpx.get(url + "/api/runs/h1")
        page = httpx.get(url + "/runs/h1")
    capsys.readouterr()
    harness_main(["--state-dir", str(tmp_path), "show", "h1", "--json"])
    assert shown.status_code == 200, shown.text[:200]
    assert shown.json() == json.loads(capsys.readouterr().out)
    assert page.status_code == 200 and "half \\ud800 pair" in "".join(PageParts(page.text).text)


def test_a_store_that_cannot_be_read_is_a_503_page_not_a_crash(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    reader.close()  # what a database gone away looks like to the pages
    with serve_ui(reader, writer=writer) as url:
        listing, run = httpx.get(url + "/"), httpx.get(url + "/runs/p1")
        with httpx.stream("GET", url + "/runs/p1/events", timeout=10) as live:
            lines = [line for _, line in zip(range(3), live.iter_lines(), strict=False)]
    assert listing.status_code == 503 and "cannot start a transaction" in listing.text
    assert run.status_code == 503
    assert live.status_code == 200 and lines[0].startswith("retry:") and ": idle" in lines  # waits it out


def test_the_ui_imports_neither_the_kit_nor_the_mock_nor_the_experiments():
    found = set()
    for path in Path(harness.ui.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module.split(".")[0])
    assert "starlette" in found and not found & {"exitkit", "mockprovider", "experiments"}


def test_importing_the_harness_or_its_cli_loads_no_web_stack():
    code = "import sys, harness, harness.cli; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "'starlette'" not in loaded and "'uvicorn'" not in loaded
