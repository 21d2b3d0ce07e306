import json
import os
import subprocess
import sys

import pytest

from harness import FileStore, MemoryStore, RunState, StateFileError, new_run
from harness.codec import to_json


def test_file_store_saves_atomically_and_loads(tmp_path):
    store = FileStore(tmp_path)
    s = new_run("t", run_id="r1")
    store.save(s)
    s.turns = 2
    store.save(s)
    assert store.load("r1") == s
    assert sorted(os.listdir(tmp_path)) == ["r1.journal", "r1.json"]  # no temp file left behind
    assert store.run_ids() == ["r1"]


def test_a_crash_mid_save_leaves_the_previous_version(tmp_path):
    class Died(Exception):
        pass

    def die(name: str) -> None:
        assert name == "mid_save"
        raise Died

    FileStore(tmp_path).save(new_run("t", run_id="r1"))
    s = new_run("t", run_id="r1")
    s.turns = 7
    with pytest.raises(Died):
        FileStore(tmp_path, checkpoint=die).save(s)  # a snapshot: dies before the rename
    assert FileStore(tmp_path).load("r1").turns == 0
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def test_a_crash_mid_append_leaves_a_torn_line_that_load_ignores(tmp_path):
    class Died(Exception):
        pass

    def die(name: str) -> None:
        raise Died

    store = FileStore(tmp_path)
    s = new_run("t", run_id="r1")
    store.save(s)
    s.turns = 1
    store.save(s)  # a journal record
    s.turns = 2
    store.checkpoint = die
    with pytest.raises(Died):
        store.save(s)  # dies half-way through the line
    assert not (tmp_path / "r1.journal").read_bytes().endswith(b"\n")
    again = FileStore(tmp_path)
    loaded = again.load("r1")
    assert loaded.turns == 1
    loaded.turns = 3
    again.save(loaded)  # the first save after a load is a snapshot: the torn tail is gone
    loaded.turns = 4
    again.save(loaded)
    assert FileStore(tmp_path).load("r1").turns == 4


def _journal_growth(tmp_path, edit, saves: int) -> tuple[FileStore, RunState, list[int]]:
    """A saved run edited by `edit(run, n)` then saved, `saves` times: the store, the run, and the
    change in the journal's size at each save (negative where a compaction emptied it)."""
    store = FileStore(tmp_path)
    s = new_run("t", run_id="r1")
    store.save(s)
    journal = tmp_path / "r1.journal"
    sizes = []
    for n in range(saves):
        edit(s, n)
        before = journal.stat().st_size
        store.save(s)
        sizes.append(journal.stat().st_size - before)
    return store, s, sizes


def test_a_save_writes_what_the_turn_added_not_what_the_run_holds(tmp_path):
    """Journal records stay the size of one turn however long the run grows."""
    def turn(s: RunState, n: int) -> None:
        s.messages.append({"role": "assistant", "content": f"turn {n} " + "x" * 200})
        s.turns += 1

    _, s, sizes = _journal_growth(tmp_path, turn, 400)
    appended = [n for n in sizes if n > 0]
    assert max(appended) < 2 * min(appended)  # each record is about one turn's bytes
    assert any(n < 0 for n in sizes)  # the journal outgrew the snapshot and was folded into it
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert FileStore(tmp_path).load("r1") == s
    assert total < 3 * len(to_json(s))


def test_another_object_of_the_same_run_is_saved_whole(tmp_path):
    store = FileStore(tmp_path)
    first = new_run("t", run_id="r1")
    store.save(first)
    second = new_run("other task", run_id="r1")  # same id and list lengths, different content
    store.save(second)
    assert FileStore(tmp_path).load("r1").messages == second.messages


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"run_id": "r1", "schema_version": 1, "messages": [', "not valid JSON"),
        (b'{"hello": "world"}', "not a harness run"),
        (b'{"run_id": "r1", "schema_version": 99}', r"schema_version 99; this harness supports \[1, 2\]"),
        (b'{"run_id": "r1", "schema_version": 1, "messages": []}', "damaged harness run"),
        (b"\xff\xfe garbage", "not UTF-8"),
    ],
)
def test_a_bad_state_file_gives_a_clear_error_and_is_left_untouched(tmp_path, content, message):
    path = tmp_path / "r1.json"
    path.write_bytes(content)
    before = path.stat()
    with pytest.raises(StateFileError, match=message):
        FileStore(tmp_path).load("r1")
    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def test_missing_run_names_the_saved_ones(tmp_path):
    FileStore(tmp_path).save(new_run("t", run_id="a1"))
    with pytest.raises(FileNotFoundError, match="saved runs: a1"):
        FileStore(tmp_path).load("zz")


def test_run_ids_must_be_safe_file_names(tmp_path):
    with pytest.raises(ValueError, match="not a safe name"):
        FileStore(tmp_path).path("../etc/passwd")


def test_memory_store_round_trips_through_json():
    store = MemoryStore()
    s = new_run("t", run_id="m1")
    store.save(s)
    s.turns = 5  # later mutation does not leak into the saved copy
    assert store.load("m1").turns == 0
    assert json.loads(store.snapshots["m1"])["run_id"] == "m1"
    fresh = MemoryStore()
    fresh.save(s)
    s.turns = 6
    fresh.save(s)  # the same object again: a journal record, not a snapshot
    assert len(fresh.journals["m1"]) == 1 and fresh.load("m1").turns == 6


def _damaged(**fields) -> bytes:
    data = json.loads(to_json(new_run("t", run_id="r1")))
    data.update(fields)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "fields",
    [{"intents": []}, {"messages": "x"}, {"messages": [1]}, {"schema_version": True},
     {"turns": "3"}, {"stop": {"type": "sleeping"}}, {"approved": {}}],
    ids=lambda f: next(iter(f)),
)
def test_a_field_of_the_wrong_type_is_refused_on_load(tmp_path, fields):
    (tmp_path / "r1.json").write_bytes(_damaged(**fields))
    with pytest.raises(StateFileError):
        FileStore(tmp_path).load("r1")


@pytest.mark.parametrize(
    "edit",
    [{"add": {"messages": "x"}}, {"add": {"messages": {"role": "user"}}}, {"cache_add": [["k", 1]]},
     {"set": []}, {"seq": 7}],
    ids=["add_string", "add_object", "cache_add_pairs", "set_list", "seq_gap"],
)
def test_a_journal_record_edited_by_hand_is_a_clear_error(tmp_path, edit):
    store = FileStore(tmp_path)
    s = new_run("t", run_id="r1")
    store.save(s)
    s.messages.append({"role": "assistant", "content": "hi"})
    store.save(s)
    journal = tmp_path / "r1.journal"
    record = json.loads(journal.read_bytes())
    record.update(edit)
    journal.write_text(json.dumps(record) + "\n")
    with pytest.raises(StateFileError, match="journal line 1 is damaged"):
        FileStore(tmp_path).load("r1")
    assert json.loads(journal.read_bytes()) == record


def test_a_failing_write_never_replaces_the_good_file(tmp_path):
    """A full disk (here: a file-size limit) makes the save raise; the last good run stays."""
    script = f"""
import resource, signal
from pathlib import Path
from harness import FileStore, new_run
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
store = FileStore({str(tmp_path)!r})
store.save(new_run("t", run_id="r1"))
size = Path({str(tmp_path)!r}, "r1.json").stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, size + 100))
big = new_run("x" * 10_000, run_id="r1")
try:
    store.save(big)
except OSError as e:
    print("refused:", e.errno)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:")
    assert FileStore(tmp_path).load("r1").messages[-1]["content"] == "t"


def test_records_left_behind_by_a_crash_before_the_journal_was_emptied_are_not_replayed(tmp_path):
    """A crash between a snapshot's rename and the journal's truncation: the old records stay."""
    store = FileStore(tmp_path)
    s = new_run("t", run_id="r1")
    store.save(s)
    for turn in range(3):
        s.messages.append({"role": "assistant", "content": f"turn {turn}"})
        s.turns += 1
        store.save(s)
    stale = (tmp_path / "r1.journal").read_bytes()
    s.messages.append({"role": "assistant", "content": "next"})
    s.turns = 10
    FileStore(tmp_path).save(s)  # another store: a snapshot of a new generation
    (tmp_path / "r1.journal").write_bytes(stale)  # as if the truncation never happened
    loaded = FileStore(tmp_path).load("r1")
    assert loaded == s and loaded.turns == 10


def test_a_failed_append_makes_the_next_save_a_snapshot(tmp_path):
    class Full(OSError):
        pass

    calls = []

    def full_once(name: str) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise Full("no space left on device")

    store = FileStore(tmp_path)
    s = new_run("t", run_id="r1")
    store.save(s)
    s.turns = 1
    store.checkpoint = full_once
    with pytest.raises(Full):
        store.save(s)  # half a line is on disk
    s.turns = 3
    store.save(s)
    assert FileStore(tmp_path).load("r1").turns == 3


@pytest.mark.parametrize("store_kind", ["file", "memory"])
def test_edits_that_are_not_appends_are_saved_whole(tmp_path, store_kind):
    """The contract: lists grow in place; any other edit replaces the list (or its last item)."""
    store = FileStore(tmp_path) if store_kind == "file" else MemoryStore()
    s = new_run("t", run_id="r1")
    store.save(s)
    s.messages[-1] = {"role": "user", "content": "the last item replaced"}
    store.save(s)
    assert store.load("r1").messages[-1]["content"] == "the last item replaced"
    s.messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, *s.messages]
    store.save(s)
    assert store.load("r1").messages == s.messages


def test_the_dedupe_cache_is_journaled_by_its_growth(tmp_path):
    def read(s: RunState, n: int) -> None:
        s.cache[f"read_file:{n}"] = n

    store, s, sizes = _journal_growth(tmp_path, read, 300)
    grown = [n for n in sizes if n > 0]
    assert max(grown) < 2 * min(grown)
    s.cache = {}  # a write replaces it
    store.save(s)
    assert FileStore(tmp_path).load("r1").cache == {}


def test_a_lone_surrogate_from_argv_round_trips(tmp_path):
    s = new_run("bad byte: \udcff", run_id="r1")
    FileStore(tmp_path).save(s)
    assert FileStore(tmp_path).load("r1").messages[-1]["content"] == "bad byte: \udcff"
