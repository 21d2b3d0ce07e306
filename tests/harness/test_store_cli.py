"""The CLI over a store URL: runs listed and shown for programs, approvals from another folder,
old state folders imported, and every bad store a one-line error with exit 2."""

import json
import os

import pytest

from harness import SQLiteStore, new_run, open_store
from harness.cli import REFUSED, main
from harness.codec import to_json


def _argv(url: str, folder, mock_url: str) -> list[str]:
    return ["--store", url, "--state-dir", str(folder), "--base-url", mock_url]


def test_list_and_show_json_read_runs_the_same_from_any_store(store_url, mock_url, tmp_path, capsys):
    argv = _argv(store_url, tmp_path / "worker", mock_url)
    assert main([*argv, "run", "--scenario", "plan", "--run-id", "p1"]) == 0
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "d1"]) == 3
    capsys.readouterr()
    assert main([*argv, "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["run", "id", "status"]
    assert any(line.startswith("d1 ") and "interrupted" in line and "c2 delete_file" in line
               for line in lines)
    assert main([*argv, "list", "--status", "interrupted", "--json"]) == 0
    (only,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (only["run_id"], only["waiting_call"], only["waiting_tool"], only["turns"]) == (
        "d1", "c2", "delete_file", 2)
    assert main([*argv, "show", "d1", "--json"]) == 3
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 1 and shown["status"] == "interrupted"
    assert shown["waiting"] == {"call_id": "c2", "tool_name": "delete_file", "args": {"path": "access.log"},
                                "in_doubt": False}
    assert shown["sandbox"] == str((tmp_path / "worker" / "sandboxes" / "d1").absolute())
    assert shown["run"]["run_id"] == "d1" and shown["lease"]["held"] is False


def test_approve_from_another_folder_acts_on_the_runs_own_sandbox(store_url, mock_url, tmp_path, capsys,
                                                                   monkeypatch):
    worker, desk = tmp_path / "worker", tmp_path / "desk"
    run = ["run", "--scenario", "destructive", "--run-id", "d1"]
    assert main([*_argv(store_url, worker, mock_url), *run]) == 3
    assert (worker / "sandboxes" / "d1" / "access.log").exists()
    desk.mkdir()
    monkeypatch.chdir(desk)
    assert main([*_argv(store_url, desk, mock_url), "approve", "d1"]) == 0
    assert "Deleted access.log" in capsys.readouterr().out
    assert not (worker / "sandboxes" / "d1" / "access.log").exists()
    assert not (desk / "sandboxes").exists()
    events = [json.loads(line) for line in (worker / "traces" / "d1.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events].count("tool_start") == 2  # list_files, then the delete


def test_a_plain_approve_that_lost_to_another_decision_exits_4_naming_the_winner(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "d1"]) == 3
    assert main([*argv, "reject", "d1", "--reason", "keep it"]) == 0
    capsys.readouterr()
    for command in (["approve", "d1"], ["reject", "d1", "--reason", "no"]):
        assert main([*argv, *command]) == REFUSED
        err = capsys.readouterr().err
        assert "refused: run d1 is no longer waiting: call 'c2' was already rejected by process" in err


def test_a_run_never_decided_that_is_not_waiting_is_still_a_usage_error(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "plan", "--run-id", "p1"]) == 0
    assert main([*argv, "approve", "p1"]) == 2
    assert "not waiting for an approval" in capsys.readouterr().err


def test_a_saved_run_whose_settings_lack_the_scenario_is_refused_not_run_as_plan(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "runaway", "--run-id", "r1", "--max-turns", "1"]) == 3
    store = SQLiteStore.in_folder(tmp_path)
    state = store.load("r1")
    del state.meta["settings"]["scenario"]
    store.save(state)
    capsys.readouterr()
    assert main([*argv, "resume", "r1"]) == 2
    assert "settings without a scenario" in capsys.readouterr().err
    assert SQLiteStore.in_folder(tmp_path).load("r1").turns == 1


def _old_folder(folder) -> None:
    """A state folder as the file format wrote it: a snapshot and a journal record."""
    folder.mkdir()
    state = new_run("old task", run_id="old1")
    data = json.loads(to_json(state))
    data["journal_generation"] = "g1"
    (folder / "old1.json").write_text(json.dumps(data))
    record = {"gen": "g1", "seq": 1, "set": {"turns": 1}, "add": {"messages": [
        {"role": "assistant", "content": "from the journal"}]}}
    (folder / "old1.journal").write_text(json.dumps(record) + "\n")
    os.mkfifo(folder / "fifo1.json")  # a FIFO in a run's place: refused, never waited on
    (folder / "deep1.json").write_text("[" * 100_000 + "]" * 100_000)


def test_import_state_moves_old_runs_in_and_refuses_special_or_deep_files(tmp_path, capsys):
    old = tmp_path / "old"
    _old_folder(old)
    db = f"sqlite:///{tmp_path / 'new' / 'harness.db'}"
    assert main(["--store", db, "import-state", str(old)]) == 2  # two damaged runs
    out = capsys.readouterr().out
    assert "imported old1 (running, 1 turns)" in out
    assert "skipped fifo1" in out and "not a regular file" in out
    assert "skipped deep1" in out and "nests 100000 levels deep" in out
    moved = open_store(db).load("old1")
    assert moved.turns == 1 and moved.messages[-1]["content"] == "from the journal"
    assert main(["--store", db, "import-state", str(old)]) == 2
    assert "skipped old1: already in" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://ann:s3cret@127.0.0.1:1/runs?connect_timeout=1", "cannot reach postgresql://ann:***@"),
        ("ftp://ann:s3cret@host/x", "unknown store URL scheme 'ftp'"),
        ("sqlite://ann:s3cret@host/x.db", "malformed store URL"),
    ],
)
def test_a_bad_store_is_one_line_exit_2_with_the_password_masked(url, message, tmp_path, capsys):
    assert main(["--store", url, "--state-dir", str(tmp_path), "list"]) == 2
    err = capsys.readouterr().err
    assert message in err and "s3cret" not in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_show_json_masks_the_password_of_the_store_url(pg_url, tmp_path, capsys):
    url = pg_url.replace("postgresql://harness@", "postgresql://harness:s3cret@")
    open_store(url).save(new_run("t", run_id="x1"))
    capsys.readouterr()
    assert main(["--store", url, "show", "x1", "--json"]) == 3
    out = capsys.readouterr().out
    assert "s3cret" not in out and json.loads(out)["store"].startswith("postgresql://harness:***@")


def test_the_store_comes_from_harness_store_when_no_flag_names_it(tmp_path, capsys, monkeypatch):
    db = tmp_path / "elsewhere" / "runs.db"
    monkeypatch.setenv("HARNESS_STORE", f"sqlite:///{db}")
    SQLiteStore(db).save(new_run("t", run_id="e1"))
    assert main(["--state-dir", str(tmp_path / "state"), "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "e1"
    assert not (tmp_path / "state").exists()


def test_a_connection_lost_mid_run_stops_it_resumable_never_half_saved(pg_url, mock_url, tmp_path, capsys):
    import psycopg

    seen = []

    def cut_the_line(name: str) -> None:
        seen.append(name)
        if seen.count("after_tool_result") == 2 and name == "after_tool_result":
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid()")

    argv = ["--store", pg_url, "--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "plan", "--run-id", "p1"], checkpoint=cut_the_line) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: ") and "rolled back" in err and "Traceback" not in err
    died = open_store(pg_url).load("p1")
    assert (died.status, died.turns) == ("running", 2)  # the last whole save: turn 2 and its result
    assert main([*argv, "resume", "p1"]) == 0
    assert "turns=3  tools=2" in capsys.readouterr().out


@pytest.mark.parametrize(("column", "value"), [("turns", "'x'"), ("cost_usd", "'lots'"),
                                               ("updated_at", "'zz'"), ("waiting_call", "x'00'"),
                                               ("status", "x'00'")])
def test_a_hand_edited_runs_row_is_named_and_the_other_runs_still_listed(column, value, tmp_path, capsys):
    import sqlite3

    db = tmp_path / "harness.db"
    store = SQLiteStore(db)
    for run_id in ("ok1", "bad1", "ok2"):
        store.save(new_run("t", run_id=run_id))
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE runs SET {column} = {value} WHERE run_id = 'bad1'")
    assert main(["--store", f"sqlite:///{db}", "list"]) == 2
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["ok1", "ok2"], out
    assert "bad1" in err and column in err and err.count("\n") == 1, err
    assert main(["--store", f"sqlite:///{db}", "list", "--json"]) == 2
    out, err = capsys.readouterr()
    assert [json.loads(line)["run_id"] for line in out.splitlines()] == ["ok1", "ok2"], out
    assert "bad1" in err and column in err and err.count("\n") == 1, err


def test_import_state_never_overwrites_a_run_created_while_it_was_importing(tmp_path):
    """Another process creates the run between the import's look and its claim: the import skips it."""
    from harness import listing

    old = tmp_path / "old"
    _old_folder(old)
    store = SQLiteStore(tmp_path / "harness.db")
    rival = new_run("the other process's run", run_id="old1")
    claim = store.claim

    def claim_after_a_rival(run_id):
        if run_id == "old1" and not store.exists("old1"):
            other = SQLiteStore(tmp_path / "harness.db")
            with other.claim("old1"):
                other.save(rival)
            other.close()
        return claim(run_id)

    store.claim = claim_after_a_rival
    lines, _ = listing.import_state(old, store)
    assert any(line.startswith("skipped old1: already in") for line in lines), lines
    assert SQLiteStore(tmp_path / "harness.db").load("old1").messages == rival.messages


def test_resuming_a_finished_run_is_a_usage_error_and_reusing_an_id_is_refused(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "plan", "--run-id", "p1"]) == 0
    capsys.readouterr()
    assert main([*argv, "resume", "p1"]) == 2
    err = capsys.readouterr().err
    assert err == "harness: run p1 is completed; nothing to resume\n", err
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "p1"]) == REFUSED
    err = capsys.readouterr().err
    assert err.startswith("harness: refused: run p1 already exists in ") and err.count("\n") == 1, err
    assert SQLiteStore.in_folder(tmp_path).load("p1").status == "completed"
