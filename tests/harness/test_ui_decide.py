"""Approve and reject from the page: the CLI's compare-and-set, the call's digest, CSRF, the
lease, and resuming here only with --resume. Runs are made by the real CLI against the mock."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from ui_support import PageParts, make_runs, one_call, save_hostile_run, scripted_mock, serve_ui, sqlite_pair

from harness import SQLiteStore
from harness.approvals import MAX_REASON_CHARS
from harness.cli import main as harness_main
from harness.state import Approval
from harness.ui.decide import Resumer


@pytest.fixture
def waiting(tmp_path, mock_url):
    """Two runs of `destructive` stopped before `delete_file access.log`, in tmp_path/harness.db."""
    make_runs(tmp_path, mock_url, ("d1", "destructive"), ("d2", "destructive"))
    return tmp_path


def _form(client: httpx.Client, run_id: str, which: str) -> dict[str, str]:
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    return PageParts(page.text).forms()[f"{which}-form"]


def _deletes(state_dir: Path, run_id: str) -> int:
    events = [json.loads(x) for x in (state_dir / "traces" / f"{run_id}.jsonl").read_text().splitlines()]
    return sum(e["type"] == "tool_start" and e["toolName"] == "delete_file" for e in events)


def test_approve_records_the_decision_and_leaves_the_run_to_a_worker(waiting, mock_url):
    reader, writer = sqlite_pair(waiting / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        answer = browser.post("/runs/d1/approve", data=_form(browser, "d1", "approve"))
        after = browser.get("/runs/d1").text
    assert answer.status_code == 303 and answer.headers["location"] == "/runs/d1"
    state = SQLiteStore(waiting / "harness.db").load("d1")
    assert [a.call_id for a in state.approved] == ["c2"] and state.status == "interrupted"
    assert state.meta["last_decision"]["verdict"] == "approved"
    assert "harness ui (process" in state.meta["last_decision"]["by"]
    assert 'id="decided"' in after and "harness resume d1" in after and 'id="approve"' not in after
    assert (waiting / "sandboxes" / "d1" / "access.log").exists()
    assert harness_main(["--state-dir", str(waiting), "--base-url", mock_url, "resume", "d1"]) == 0
    assert not (waiting / "sandboxes" / "d1" / "access.log").exists() and _deletes(waiting, "d1") == 1


def test_reject_with_a_reason_writes_it_into_the_transcript_in_words(waiting, mock_url):
    reader, writer = sqlite_pair(waiting / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = {**_form(browser, "d1", "reject"), "reason": "keep the access log <for audits>"}
        assert browser.post("/runs/d1/reject", data=form).status_code == 303
        empty = browser.post("/runs/d2/reject", data={**_form(browser, "d2", "reject"), "reason": "  "})
    state = SQLiteStore(waiting / "harness.db").load("d1")
    assert state.messages[-1] == {"role": "tool", "tool_call_id": "c2", "name": "delete_file",
                                  "content": "Rejected by the user: keep the access log <for audits>"}
    assert empty.status_code == 400 and "needs a reason" in empty.text
    assert SQLiteStore(waiting / "harness.db").load("d2").rejections == []
    assert harness_main(["--state-dir", str(waiting), "--base-url", mock_url, "resume", "d1"]) == 0
    assert SQLiteStore(waiting / "harness.db").load("d1").answer == (
        "I did not delete anything: you declined the deletion.")
    assert (waiting / "sandboxes" / "d1" / "access.log").exists()


def test_a_reason_as_long_as_the_reason_box_allows_is_recorded_though_the_browser_posts_crlf(waiting):
    # The box's maxlength counts a line break once; a browser posts it as CR LF (the HTML form
    # encoding), so a reason the box accepted must not count twice as long when it arrives.
    typed = "keep it\n" * (MAX_REASON_CHARS // 8)
    assert len(typed) == MAX_REASON_CHARS
    reader, writer = sqlite_pair(waiting / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = {**_form(browser, "d1", "reject"), "reason": typed.replace("\n", "\r\n")}
        answer = browser.post("/runs/d1/reject", data=form)
    assert answer.status_code == 303, answer.text[:300]
    assert [r.reason for r in SQLiteStore(waiting / "harness.db").load("d1").rejections] == [typed]


@pytest.mark.parametrize("forged", [
    {"csrf": ""}, {"csrf": "x" * 43}, {"headers": {"origin": "http://evil.example"}},
    {"headers": {"sec-fetch-site": "cross-site"}}, {"headers": {"origin": "null"}},
])
def test_a_post_without_this_browsers_csrf_token_or_from_another_site_is_refused(waiting, forged):
    reader, writer = sqlite_pair(waiting / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = _form(browser, "d1", "approve")
        if "csrf" in forged:
            form["csrf"] = forged["csrf"]
        answer = browser.post("/runs/d1/approve", data=form, headers=forged.get("headers"))
    assert answer.status_code == 403
    assert SQLiteStore(waiting / "harness.db").load("d1").approved == []


def test_a_decision_on_arguments_that_changed_since_the_page_was_drawn_is_refused(waiting):
    reader, writer = sqlite_pair(waiting / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = _form(browser, "d1", "approve")
        edit = SQLiteStore(waiting / "harness.db")
        state = edit.load("d1")
        call = {**state.messages[-1]["tool_calls"][0]}
        call["function"] = {**call["function"], "arguments": '{"path": "errors.log"}'}
        state.messages[-1] = {**state.messages[-1], "tool_calls": [call]}  # a new object: saved whole
        edit.save(state)
        answer = browser.post("/runs/d1/approve", data=form)
        fresh = browser.post("/runs/d1/approve", data=_form(browser, "d1", "approve"))
    assert answer.status_code == 409 and "has changed since this page was drawn" in answer.text
    assert fresh.status_code == 303  # drawn again, the person sees errors.log and may approve that
    approved = SQLiteStore(waiting / "harness.db").load("d1").approved
    assert len(approved) == 1 and approved[0].call_id == "c2"


@pytest.mark.parametrize("second", ["approve", "reject"])
def test_two_people_deciding_at_once_one_wins_and_the_other_is_told_who_and_what(waiting, second):
    reader, writer = sqlite_pair(waiting / "harness.db")
    answers: dict[str, httpx.Response] = {}
    with serve_ui(reader, writer=writer) as url:
        people = {"ann": httpx.Client(base_url=url), "bob": httpx.Client(base_url=url)}
        forms = {"ann": _form(people["ann"], "d1", "approve"), "bob": _form(people["bob"], "d1", "reject")}
        verbs = {"ann": "approve", "bob": second}
        start = threading.Barrier(2)

        def click(who: str) -> None:
            start.wait()
            data = {**forms[who], "reason": "not today"}
            answers[who] = people[who].post(f"/runs/d1/{verbs[who]}", data=data)

        threads = [threading.Thread(target=click, args=(who,)) for who in people]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in people.values():
            c.close()
    codes = sorted(a.status_code for a in answers.values())
    assert codes == [303, 409]
    (loser,) = [a for a in answers.values() if a.status_code == 409]
    state = SQLiteStore(waiting / "harness.db").load("d1")
    won = state.meta["last_decision"]["verdict"]
    assert "Your decision was not applied" in loser.text
    assert f"On record: call c2 was {won}" in loser.text and "by harness ui (process" in loser.text
    assert len(state.approved) + len(state.rejections) == 1


def test_a_decision_made_at_the_terminal_first_is_shown_to_the_page_that_comes_second(waiting, mock_url):
    reader, writer = sqlite_pair(waiting / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = _form(browser, "d1", "approve")
        argv = ["--state-dir", str(waiting), "--base-url", mock_url, "reject", "d1", "--reason", "not now",
                "--no-resume"]
        assert harness_main(argv) == 3  # decided, left for a worker: still stopped, resumable
        answer = browser.post("/runs/d1/approve", data=form)
    assert answer.status_code == 409 and "was already rejected" in answer.text
    assert 'On record: call c2 was rejected with the reason "not now" by process' in answer.text


HOLDER = textwrap.dedent("""
    import sys, time
    from harness import SQLiteStore
    store = SQLiteStore(sys.argv[1])
    with store.claim(sys.argv[2]):
        print("holding", flush=True)
        sys.stdin.readline()
""")


def test_a_run_another_process_holds_is_read_only_and_its_decision_is_refused(waiting):
    reader, writer = sqlite_pair(waiting / "harness.db")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(waiting / "harness.db"), "d1"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with serve_ui(reader, writer=writer, decide_wait=0.3) as url, httpx.Client(base_url=url) as browser:
            form = _form(browser, "d2", "approve")  # d1's page offers no form; d2's call is the same
            page = browser.get("/runs/d1").text
            answer = browser.post("/runs/d1/approve", data=form)
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
        holder.stdout.close()
    assert 'id="readonly"' in page and f"process {holder.pid}" in page
    assert 'id="approve"' not in page and "Read-only while another process holds the run" in page
    assert answer.status_code == 409 and f"owned by process {holder.pid}" in answer.text
    assert writer.load("d1").approved == []


def test_with_resume_the_ui_process_finishes_the_run_and_the_file_is_deleted_once(waiting, mock_url):
    reader, writer = sqlite_pair(waiting / "harness.db")
    resumer = Resumer(writer, state_dir=waiting, base_url=mock_url, log=lambda line: None)
    with serve_ui(reader, writer=writer, resumer=resumer) as url, httpx.Client(base_url=url) as browser:
        assert browser.post("/runs/d1/approve", data=_form(browser, "d1", "approve")).status_code == 303
        resumer.join(timeout=30)
        page = browser.get("/runs/d1").text
    state = SQLiteStore(waiting / "harness.db").load("d1")
    assert state.status == "completed" and state.answer == "Deleted access.log to free space."
    assert not (waiting / "sandboxes" / "d1" / "access.log").exists() and _deletes(waiting, "d1") == 1
    assert '<pre id="answer">Deleted access.log to free space.</pre>' in page


@pytest.mark.slow
def test_harness_run_then_harness_ui_resume_in_two_processes_deletes_the_file_once(tmp_path, mock_url):
    common = [sys.executable, "-m", "harness", "--state-dir", str(tmp_path), "--base-url", mock_url]
    first = subprocess.run([*common, "run", "--scenario", "destructive", "--run-id", "d1"],
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 3, first.stderr
    ui = subprocess.Popen([*common, "ui", "--port", "0", "--resume"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        url = ui.stdout.readline().split()[2].rstrip("/")
        with httpx.Client(base_url=url, timeout=30) as browser:
            assert browser.post("/runs/d1/approve", data=_form(browser, "d1", "approve")).status_code == 303
            store = SQLiteStore(tmp_path / "harness.db")
            deadline = time.monotonic() + 30
            while store.load("d1").status != "completed" and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        ui.send_signal(signal.SIGINT)
        _, err = ui.communicate(timeout=20)
    assert store.load("d1").answer == "Deleted access.log to free space.", err
    assert "run d1 resumed here and stopped completed" in err
    assert not (tmp_path / "sandboxes" / "d1" / "access.log").exists() and _deletes(tmp_path, "d1") == 1


def _approve_and_reject_at_once(one: str, two: str) -> list[httpx.Response]:
    """A person on UI `one` approves d1 while another on UI `two` rejects it, at the same moment."""
    people = [httpx.Client(base_url=one), httpx.Client(base_url=two)]
    forms = [_form(people[0], "d1", "approve"), {**_form(people[1], "d1", "reject"), "reason": "no"}]
    start, answers = threading.Barrier(2), []

    def click(i: int) -> None:
        start.wait()
        answers.append(people[i].post(f"/runs/d1/{('approve', 'reject')[i]}", data=forms[i]))

    threads = [threading.Thread(target=click, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in people:
        c.close()
    return answers


def test_two_ui_servers_on_one_database_deciding_at_once_meet_at_the_lease(waiting):
    """Each server has its own store objects, as two UI processes would: the loser waits for
    the winner's lease, then finds the call decided and names the winner's decision."""
    db = waiting / "harness.db"
    first, second = sqlite_pair(db), sqlite_pair(db)
    with serve_ui(first[0], writer=first[1]) as one, serve_ui(second[0], writer=second[1]) as two:
        answers = _approve_and_reject_at_once(one, two)
    assert sorted(a.status_code for a in answers) == [303, 409]
    (loser,) = [a for a in answers if a.status_code == 409]
    won = SQLiteStore(db).load("d1").meta["last_decision"]["verdict"]
    assert f"On record: call c2 was {won}" in loser.text


def test_a_run_saved_from_python_is_decided_here_and_left_to_its_program(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    save_hostile_run(writer, "h1", ["<b>x</b>", "\u202eevil", "plain"])
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        form = _form(browser, "h1", "approve")
        assert form["call_id"] == "c<1>"
        assert browser.post("/runs/h1/approve", data=form).status_code == 303
        page = browser.get("/runs/h1").text
    assert [a.call_id for a in writer.load("h1").approved] == ["c<1>"]
    assert "Its program continues it (harness.run)" in page


def test_a_call_id_with_an_invisible_character_is_shown_marked_and_decided_from_the_page(tmp_path):
    hidden = one_call("hidden", {"id": "call_\u200b2", "name": "delete_file",
                                 "arguments": {"path": "access.log"}})
    with scripted_mock(hidden) as url:
        make_runs(tmp_path, url, ("z1", "hidden"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        page = browser.get("/runs/z1").text
        answer = browser.post("/runs/z1/approve", data=_form(browser, "z1", "approve"))
    assert "call_\\u200b2" in "".join(PageParts(page).text)  # marked where it is read
    assert answer.status_code == 303, answer.text
    assert [a.call_id for a in writer.load("z1").approved] == ["call_\u200b2"]


@pytest.mark.parametrize("call_id", ["c\x00nul", "c\r\nline", 'c"quote\\', "c\u202e\u2066"])
def test_any_call_id_a_provider_sends_survives_the_page_and_its_form(tmp_path, call_id):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    state = save_hostile_run(writer, "h1", ["plain", "text"])
    call = state.messages[-1]["tool_calls"][0]
    state.messages[-1] = {**state.messages[-1], "tool_calls": [{**call, "id": call_id}]}
    state.stop = Approval(call_id=call_id, tool_name="delete_file", args=state.stop.args)
    writer.save(state)
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        answer = browser.post("/runs/h1/approve", data=_form(browser, "h1", "approve"))
    assert answer.status_code == 303, answer.text
    assert [a.call_id for a in writer.load("h1").approved] == [call_id]


HOLD_FOR = textwrap.dedent("""
    import sys, time
    from harness import SQLiteStore
    store = SQLiteStore(sys.argv[1])
    with store.claim(sys.argv[2]):
        print("holding", flush=True)
        time.sleep(float(sys.argv[3]))
""")


def test_the_winning_approval_is_resumed_even_while_a_losing_decider_holds_the_run(waiting, mock_url):
    """What a second `harness ui --resume` does after losing: it holds the run's lease for a
    moment to find the call decided. The winner's resume waits it out instead of giving up."""
    reader, writer = sqlite_pair(waiting / "harness.db")
    lines: list[str] = []
    resumer = Resumer(writer, state_dir=waiting, base_url=mock_url, log=lines.append)
    with serve_ui(reader, writer=writer) as url, httpx.Client(base_url=url) as browser:
        assert browser.post("/runs/d1/approve", data=_form(browser, "d1", "approve")).status_code == 303
    loser = subprocess.Popen([sys.executable, "-c", HOLD_FOR, str(waiting / "harness.db"), "d1", "0.5"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert loser.stdout.readline().strip() == "holding"
        resumer.start("d1")  # the winner's resume, while the loser still holds the lease
        resumer.join(timeout=30)
    finally:
        loser.wait(timeout=10)
        loser.stdout.close()
    assert writer.load("d1").status == "completed", lines
    assert _deletes(waiting, "d1") == 1 and lines == ["harness ui: run d1 resumed here and stopped completed"]


@pytest.mark.slow
def test_two_ui_resume_servers_racing_approve_and_reject_always_finish_the_run(tmp_path, mock_url):
    for attempt in range(6):
        state_dir = tmp_path / str(attempt)
        make_runs(state_dir, mock_url, ("d1", "destructive"))
        db = state_dir / "harness.db"
        servers = [sqlite_pair(db), sqlite_pair(db)]
        resumers = [Resumer(w, state_dir=state_dir, base_url=mock_url, log=lambda line: None)
                    for _, w in servers]
        with serve_ui(servers[0][0], writer=servers[0][1], resumer=resumers[0]) as one, \
                serve_ui(servers[1][0], writer=servers[1][1], resumer=resumers[1]) as two:
            answers = _approve_and_reject_at_once(one, two)
            for r in resumers:
                r.join(timeout=60)
        state = SQLiteStore(db).load("d1")
        assert sorted(a.status_code for a in answers) == [303, 409]
        assert state.status == "completed", (attempt, state.meta["last_decision"])
        assert _deletes(state_dir, "d1") == (state.meta["last_decision"]["verdict"] == "approved")
