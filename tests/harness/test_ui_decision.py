"""The decision screen: what will happen, to what, where, and why the run asks, said above the
arguments; every argument listed, long ones folded with their size; what changed since the
previous call of the same tool; a reason as long as the CLI takes."""

from __future__ import annotations

import socket

import httpx
from ui_support import (
    FILLER,
    PADDED,
    PageParts,
    make_runs,
    one_call,
    save_hostile_run,
    scripted_mock,
    serve_ui,
    sqlite_pair,
)

from harness import SQLiteStore
from harness.approvals import MAX_REASON_CHARS
from harness.cli import main as harness_main
from harness.state import Approval
from harness.ui.decide import Resumer


def _page(tmp_path, run_id: str, **serve) -> PageParts:
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, **serve) as url:
        page = httpx.get(f"{url}/runs/{run_id}")
    assert page.status_code == 200
    return PageParts(page.text)


def test_the_decision_screen_says_the_task_the_tool_why_it_asks_where_and_what_approve_does(tmp_path,
                                                                                            mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    page = _page(tmp_path, "d1")
    assert page.text_of("task") == "Which file mentions a timeout?"
    assert "delete_file" in page.text_of("tool")
    assert "Delete a file from the working folder." in page.text_of("tool")
    why = page.text_of("why")
    assert "needs a person's approval" in why and "writes" in why and "--auto-approve" in why
    where = page.text_of("where")
    assert str(tmp_path.absolute() / "sandboxes" / "d1") in where and socket.gethostname() in where
    then = page.text_of("next")
    assert "records the decision" in then and "harness resume d1" in then
    assert "Rejecting writes your reason into the transcript" in page.text_of("next")


def test_with_resume_approve_says_it_runs_the_call_now_in_this_process(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    resumer = Resumer(SQLiteStore(tmp_path / "harness.db"), state_dir=tmp_path, base_url=mock_url)
    then = _page(tmp_path, "d1", resumer=resumer).text_of("next")
    assert "runs delete_file now, in this process" in then
    assert socket.gethostname() in then and "harness resume" not in then


def test_a_run_saved_from_python_says_what_the_ui_cannot_know(tmp_path):
    save_hostile_run(SQLiteStore(tmp_path / "harness.db"), "h1", ["plain", "text"])
    page = _page(tmp_path, "h1")
    assert "not known here" in page.text_of("tool")
    assert "its program" in page.text_of("where") and "its program" in page.text_of("next")
    assert page.text_of("task") == "plain\ntext"


def test_every_argument_is_listed_and_a_long_value_is_folded_with_its_size(tmp_path):
    with scripted_mock(PADDED) as url:
        make_runs(tmp_path, url, ("x1", "padded"))
    page = _page(tmp_path, "x1")
    assert list(page.by_arg) == ["path", "filler"]  # the tool's parameter, then what it does not take
    assert "the tool's parameters first, then 1 it does not declare" in page.text_of("waiting-args")
    assert "".join(page.by_arg["path"]).strip() == '"path": "access.log"'
    filler = page.attrs(data_arg="filler")[0]
    assert "long" in (filler.get("class") or "")
    folded = [a for t, a in page.tags if t == "details"]
    assert len(folded) == 1 and "open" not in folded[0]
    assert "100,000 characters" in "".join(page.by_arg["filler"])
    assert FILLER in "".join(page.by_arg["filler"])  # all of it, one click away
    assert "2 arguments" in page.text_of("waiting-args")


def test_a_changed_argument_is_marked_against_the_previous_call_of_the_same_tool(tmp_path):
    twice = one_call("twice", {"name": "delete_file", "arguments": {"path": "notes.txt", "why": "rotate"}},
                     {"name": "delete_file", "arguments": {"path": "access.log", "why": "rotate"}})
    with scripted_mock(twice) as url:
        make_runs(tmp_path, url, ("t1", "twice"))
        assert harness_main(["--state-dir", str(tmp_path), "--base-url", url, "approve", "t1"]) == 3
    page = _page(tmp_path, "t1")
    changed = [a["data-arg"] for a in page.attrs() if "changed" in (a.get("class") or "").split()]
    assert changed == ["path"]
    assert 'was "notes.txt"' in "".join(page.by_arg["path"])
    assert "call_0_0" in page.text_of("previous")


def test_a_call_identical_to_an_earlier_one_says_so_and_what_became_of_it(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("dd", "double_delete"))
    assert harness_main(["--state-dir", str(tmp_path), "--base-url", mock_url, "approve", "dd"]) == 3
    previous = _page(tmp_path, "dd").text_of("previous")
    assert "identical to call c1" in previous and "deleted access.log" in previous


def test_the_reason_box_takes_as_much_as_the_cli_and_no_more(tmp_path, mock_url, capsys):
    make_runs(tmp_path, mock_url, ("d1", "destructive"), ("d2", "destructive"))
    longest, too_long = "€" * MAX_REASON_CHARS, "€" * (MAX_REASON_CHARS + 1)
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        page = PageParts(browser.get("/runs/d1").text)
        (box,) = [a for t, a in page.tags if t == "textarea"]
        over = browser.post("/runs/d1/reject", data={**page.forms()["reject-form"], "reason": too_long})
        taken = browser.post("/runs/d1/reject", data={**page.forms()["reject-form"], "reason": longest})
    assert box["maxlength"] == str(MAX_REASON_CHARS)
    assert over.status_code == 400 and f"at most {MAX_REASON_CHARS:,} characters" in over.text
    assert taken.status_code == 303
    assert [r.reason for r in writer.load("d1").rejections] == [longest]
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url, "reject", "d2", "--no-resume"]
    assert harness_main([*argv, "--reason", too_long]) == 2
    assert f"at most {MAX_REASON_CHARS:,} characters" in capsys.readouterr().err
    assert harness_main([*argv, "--reason", longest]) == 3


def test_a_call_in_doubt_says_it_may_already_have_happened_and_that_approving_runs_it_again(tmp_path):
    store = SQLiteStore(tmp_path / "harness.db")
    state = save_hostile_run(store, "h1", ["plain", "text"])
    state.stop = Approval(call_id="c<1>", tool_name="delete_file", args=state.stop.args, in_doubt=True)
    store.save(state)
    why = _page(tmp_path, "h1").text_of("why")
    assert "In doubt" in why and "may already have happened" in why and "Approving runs it again" in why
