"""The store contract, against every store: SQLite (the default), PostgreSQL (a real throwaway
server) and the in-memory one. What a save writes, what a load refuses, who may write."""

import json
import math

import pytest
from rows_support import damage, rows

from harness import MemoryStore, RunState, SQLiteStore, StateFileError, new_run, open_store
from harness.codec import MAX_DEPTH
from harness.store import RunOwned, StoreError


def _turn(s: RunState, n: int) -> None:
    s.messages.append({"role": "assistant", "content": f"turn {n} " + "x" * 200})
    s.turns += 1


def test_a_saved_run_loads_equal_in_another_store_object(make_store):
    store = make_store()
    s = new_run("t", run_id="r1")
    store.save(s)
    for n in range(3):
        _turn(s, n)
        store.save(s)
    assert make_store().load("r1") == s
    assert store.run_ids() == ["r1"]


def test_appended_items_with_quotes_backslashes_braces_and_non_ascii_read_back_exactly(make_store):
    """Every character a JSON body may hold survives a save that only appends (PostgreSQL sends
    those rows as binary arrays, where text arrays would need quoting)."""
    store = make_store()
    s = new_run("t", run_id="q1")
    store.save(s)
    for text in ['say "hi"', "C:\\dir\\file", "{a, b}", "NULL", "", "ünïcødé ☃ 𝄞", ",\t\n\"\\"]:
        s.messages.append({"role": "assistant", "content": text})
        s.turns += 1
        store.save(s)
    assert make_store().load("q1") == s


def test_a_save_writes_what_the_turn_added_not_what_the_run_holds(tmp_path):
    """Per save, the statements SQLite runs carry about one turn's bytes however long the run is."""
    s, sizes = _bytes_per_save(tmp_path, _turn, 300)
    assert max(sizes) < 1.5 * min(sizes)
    assert SQLiteStore(tmp_path / "harness.db").load("r1") == s


def _bytes_per_save(tmp_path, turn, turns: int) -> tuple[RunState, list[int]]:
    """A run grown by `turn` `turns` times, saved after each; the SQL text each save ran."""
    store = SQLiteStore(tmp_path / "harness.db")
    written: list[int] = []
    s = new_run("t", run_id="r1")
    store.save(s)
    store._conn.set_trace_callback(lambda sql: written.append(len(sql)))
    sizes = []
    for n in range(turns):
        turn(s, n)
        written.clear()
        store.save(s)
        sizes.append(sum(written))
    return s, sizes


def _read_turn(s, n: int) -> None:
    """A turn of a read-only tool deduped: a call, its result, one new cache entry."""
    call = {"id": f"c{n}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    s.messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    s.messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": "x" * 40})
    s.cache[f'read_file:{{"path":"notes/file_{n:05d}.txt"}}'] = len(s.messages) - 1
    s.turns = n + 1


def test_a_save_with_a_growing_dedupe_cache_writes_only_the_new_entry(tmp_path):
    """The cache grows by an entry per deduped call: a save writes that entry, not the cache."""
    s, sizes = _bytes_per_save(tmp_path, _read_turn, 200)
    assert sizes[199] < 1.3 * sizes[19], (sizes[19], sizes[199])
    assert SQLiteStore(tmp_path / "harness.db").load("r1") == s


def test_a_dedupe_cache_replaced_or_edited_is_saved_whole(make_store):
    store = make_store()
    s = new_run("t", run_id="r1")
    for n in range(3):
        _read_turn(s, n)
        store.save(s)
    s.cache = {}  # a write clears the cache by replacing it
    _read_turn(s, 3)
    store.save(s)
    assert make_store().load("r1").cache == s.cache
    s.cache[next(iter(s.cache))] = 2  # an entry changed in place
    store.save(s)
    assert make_store().load("r1").cache == s.cache


def test_edits_that_are_not_appends_are_saved_whole(make_store):
    store = make_store()
    s = new_run("t", run_id="r1")
    store.save(s)
    s.messages[-1] = {"role": "user", "content": "the last item replaced"}
    store.save(s)
    assert make_store().load("r1").messages[-1]["content"] == "the last item replaced"
    s.messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, *s.messages]
    store.save(s)
    assert make_store().load("r1").messages == s.messages
    other = new_run("other task", run_id="r1")  # same id and list lengths, different object
    store.save(other)
    assert make_store().load("r1").messages == other.messages


def test_a_later_mutation_does_not_leak_into_the_saved_copy(make_store):
    store = make_store()
    s = new_run("t", run_id="m1")
    store.save(s)
    s.turns = 5
    assert store.load("m1").turns == 0


def test_missing_run_names_the_saved_ones(make_store):
    make_store().save(new_run("t", run_id="a1"))
    with pytest.raises(FileNotFoundError, match="saved runs: a1"):
        make_store().load("zz")


def test_run_ids_must_be_safe_names(make_store):
    with pytest.raises(ValueError, match="not a safe name"):
        make_store().load("../etc/passwd")


def test_a_lone_surrogate_from_argv_round_trips(make_store):
    make_store().save(new_run("bad byte: \udcff", run_id="r1"))
    assert make_store().load("r1").messages[-1]["content"] == "bad byte: \udcff"


@pytest.mark.parametrize(
    ("changes", "raw", "message"),
    [
        ({}, '{"schema_version": 2, "messages": [', "not valid JSON"),
        ({"schema_version": 99}, None, r"schema_version 99; this harness supports \[1, 2\]"),
        ({"intents": []}, None, "intents"),
        ({"turns": "3"}, None, "turns"),
        ({"stop": {"type": "sleeping"}}, None, "stop"),
        ({"messages": [1]}, None, r"messages\[0\]"),
    ],
    ids=["head_not_json", "newer_run_schema", "intents_list", "turns_string", "stop_unknown", "message_int"],
)
def test_a_row_edited_by_hand_is_a_clear_error_and_is_left_untouched(tmp_path, changes, raw, message):
    db = tmp_path / "harness.db"
    SQLiteStore(db).save(new_run("t", run_id="r1"))
    damage(db, "r1", changes, raw_head=raw)
    before = rows(db, "r1")
    with pytest.raises(StateFileError, match=message):
        SQLiteStore(db).load("r1")
    assert rows(db, "r1") == before


def _nested(depth: int) -> dict:
    value: object = "x"
    for _ in range(depth - 2):  # the message object and its content list are two levels
        value = [value]
    return {"role": "user", "content": [value]}


@pytest.mark.parametrize("depth", [*range(MAX_DEPTH - 3, MAX_DEPTH + 4), 2_000, 100_000])
def test_nesting_deeper_than_the_documented_limit_is_a_clear_error(tmp_path, depth):
    db = tmp_path / "harness.db"
    SQLiteStore(db).save(new_run("t", run_id="r1"))
    text = json.dumps([_nested(depth)]) if depth < 1000 else None
    if text is None:  # too deep for json.dumps itself: written as text
        text = '[{"role":"user","content":' + "[" * (depth - 1) + "]" * (depth - 1) + "}]"
    damage(db, "r1", {"messages": json.loads(text) if depth < 1000 else []})
    if depth >= 1000:
        import sqlite3

        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO run_items VALUES ('r1', 'messages', 0, ?)", (text[1:-1],))
    if depth <= MAX_DEPTH:
        assert SQLiteStore(db).load("r1").messages[0]["role"] == "user"
    else:
        with pytest.raises(StateFileError, match=f"nests {depth} levels deep; .* at most {MAX_DEPTH}"):
            SQLiteStore(db).load("r1")


def test_a_database_of_a_newer_layout_is_refused_and_not_written(tmp_path):
    import sqlite3

    db = tmp_path / "harness.db"
    SQLiteStore(db).save(new_run("t", run_id="r1"))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE harness_schema SET version = 7")
    before = db.read_bytes()
    with pytest.raises(StoreError, match="layout version 7"):
        SQLiteStore(db)
    assert db.read_bytes() == before


def test_a_save_into_a_database_a_newer_harness_changed_under_the_run_is_refused(tmp_path):
    import sqlite3

    db = tmp_path / "harness.db"
    store, state = SQLiteStore(db), new_run("t", run_id="r1")
    store.save(state)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE harness_schema SET version = 7")
    state.messages.append({"role": "assistant", "content": "done"})
    state.turns = 1
    with pytest.raises(StoreError, match="layout version 7"):
        store.save(state)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT turns FROM runs").fetchall() == [(0,)]
        assert conn.execute("SELECT count(*) FROM run_items WHERE field = 'messages'").fetchall() == [(1,)]


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_a_special_file_in_place_of_the_database_is_refused_without_blocking(tmp_path, kind):
    import os

    db = tmp_path / "harness.db"
    if kind == "fifo":
        os.mkfifo(db)
    elif kind == "symlink":
        db.symlink_to(tmp_path / "elsewhere.db")
    else:
        db.mkdir()
    with pytest.raises(StoreError, match="harness.db is (not a regular file|a symlink)"):
        SQLiteStore(db)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u:hunter2@h/db", "unknown store URL scheme 'mysql'"),
        ("sqlite://host/x.db", "malformed store URL"),
        ("sqlite:///", "names no database file"),
        ("just-a-name", "malformed store URL"),
        ("postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1", "cannot reach postgresql://u:\\*\\*\\*@"),
        ("postgresql://u:hunter2@127.0.0.1:1", "name the database"),
    ],
)
def test_a_bad_store_url_is_one_line_naming_the_problem_with_the_password_masked(url, message):
    with pytest.raises(StoreError, match=message) as info:
        open_store(url)
    assert "hunter2" not in str(info.value) and "\n" not in str(info.value)


# --- one writer per run ------------------------------------------------------------------


def test_a_second_claim_is_refused_at_once_naming_the_holder(make_store):
    owner, other = make_store(), make_store()
    with owner.claim("r1"):
        with pytest.raises(RunOwned, match=r"owned by process \d+ on .* since 20\d\d-"):
            with other.claim("r1"):
                pass
    with other.claim("r1"):  # released: free again
        pass


def test_a_store_that_did_not_claim_the_run_may_not_save_it_while_another_owns_it(make_store):
    owner, other = make_store(), make_store()
    state = new_run("t", run_id="r1")
    other.save(state)  # nobody owns it: the single-process Python API just works
    with owner.claim("r1"):
        owner.save(state)
        if not isinstance(owner, MemoryStore):  # one in-memory store is one object: it is the owner
            with pytest.raises(RunOwned):
                other.save(state)
    other.save(state)


@pytest.mark.parametrize("since", ["1e300", "Infinity", "NaN", '"yesterday"', "-1e300"])
def test_a_lease_row_with_a_nonsense_time_reads_as_unknown(tmp_path, since):
    import os
    import socket
    import sqlite3
    import time

    db = tmp_path / "harness.db"
    SQLiteStore(db)
    holder = f'{{"pid": {os.getpid()}, "host": "{socket.gethostname()}", "since": {since}}}'
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO leases VALUES ('r1', 3, 'someone', ?, ?)", (holder, time.time() + 60))
    with pytest.raises(RunOwned, match="since an unknown time"):
        with SQLiteStore(db).claim("r1"):
            pass


def test_math_is_finite_guard_matches_what_json_can_carry():
    assert not math.isfinite(json.loads("1e999"))


def test_the_depth_limit_holds_at_every_depth_from_1_to_2000():
    from harness.codec import check_depth

    refused = []
    for depth in range(1, 2001):
        try:
            text = '{"a":' * depth + "1" + "}" * depth if depth % 2 else "[" * depth + "]" * depth
            check_depth(text, "run")
        except StateFileError:
            refused.append(depth)
    assert refused == list(range(MAX_DEPTH + 1, 2001))


@pytest.mark.parametrize("until", ["'soon'", "'Infinity'", "x'00'"])
def test_a_lease_row_with_a_nonsense_expiry_holds_nothing_and_raises_nothing(tmp_path, until):
    import sqlite3

    db = tmp_path / "harness.db"
    SQLiteStore(db)
    with sqlite3.connect(db) as conn:
        conn.execute(f"INSERT INTO leases VALUES ('r1', 3, 'someone', '{{}}', {until})")
    store = SQLiteStore(db)
    assert store.lease("r1")["held"] is False
    with store.claim("r1"):
        store.save(new_run("t", run_id="r1"))
    assert store.lease("r1")["epoch"] == 4


def test_a_run_whose_head_still_holds_its_cache_loads_and_saves_its_cache_as_rows(tmp_path):
    """A database written when the cache lived in the head row reads the same, and its next save
    moves the cache into rows."""
    import sqlite3

    db = tmp_path / "harness.db"
    store = SQLiteStore(db)
    s = new_run("t", run_id="r1")
    for n in range(3):
        _read_turn(s, n)
    store.save(s)
    with sqlite3.connect(db) as conn:  # the layout before: cache in the head, no cache rows
        conn.execute("DELETE FROM run_items WHERE field = 'cache'")
        head = json.loads(conn.execute("SELECT head FROM runs").fetchone()[0])
        conn.execute("UPDATE runs SET head = ?", (json.dumps({**head, "cache": s.cache}),))
    reader = SQLiteStore(db)
    loaded = reader.load("r1")
    assert loaded.cache == s.cache
    loaded.turns += 1
    reader.save(loaded)  # the same store object: it must know the cache has no rows yet
    assert SQLiteStore(db).load("r1") == loaded
    head, items = rows(db, "r1")
    assert "cache" not in json.loads(head) and any(f == "cache" for f, _, _ in items)
