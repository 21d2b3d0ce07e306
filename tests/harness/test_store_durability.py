"""What a commit survives: the store's durability, given by argument, `$HARNESS_DURABILITY` or
`--durability`, and a write-ahead intent synced to disk whichever is chosen."""

import psycopg
import pytest

from harness import SQLiteStore, new_run, open_store
from harness.cli import _parser
from harness.cli import main as harness_main
from harness.state import Intent, ToolRun
from harness.store import StoreError
from harness.wiring import open_cli_store

NORMAL, FULL = 1, 2
"""`PRAGMA synchronous` values: a commit handed to the operating system / synced to the disk."""


def _sync_levels(store: SQLiteStore) -> list[int]:
    """The synchronous level in force inside each save's transaction of a run that opens an
    intent and then records its result: [a turn, the intent, the result]."""
    levels: list[int] = []
    store.checkpoint = lambda _: levels.append(store._conn.execute("PRAGMA synchronous").fetchone()[0])
    s = new_run("t", run_id="r1")
    store.save(s)
    s.intents["c1"] = Intent(call_id="c1", tool="delete_file", args={"path": "access.log"})
    store.save(s)
    del s.intents["c1"]
    s.tool_runs.append(ToolRun(tool="delete_file", args={"path": "access.log"}, call_id="c1", ok=True,
                               ms=1.0))
    store.save(s)
    assert store.ledger("r1")[0]["state"] == "done"
    return levels


def test_by_default_a_turn_survives_a_killed_process_and_an_intent_a_power_cut_too(tmp_path):
    store = SQLiteStore(tmp_path / "harness.db")
    assert store.durability == "process-crash"
    assert _sync_levels(store) == [NORMAL, FULL, NORMAL]
    assert SQLiteStore(tmp_path / "harness.db").load("r1").tool_runs[0].call_id == "c1"


def test_power_loss_durability_syncs_every_commit(tmp_path):
    store = SQLiteStore(tmp_path / "harness.db", durability="power-loss")
    assert _sync_levels(store) == [FULL, FULL, FULL]


def test_the_durability_comes_from_the_environment_unless_an_argument_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_DURABILITY", "power-loss")
    assert SQLiteStore(tmp_path / "a.db").durability == "power-loss"
    assert open_store(f"sqlite:///{tmp_path / 'b.db'}").durability == "power-loss"
    assert SQLiteStore(tmp_path / "c.db", durability="process-crash").durability == "process-crash"


def test_an_unknown_durability_is_refused_by_name_before_anything_is_opened(tmp_path, monkeypatch):
    with pytest.raises(StoreError, match="^durability must be one of process-crash, power-loss; "
                                         "got 'power'$"):
        SQLiteStore(tmp_path / "harness.db", durability="power")
    monkeypatch.setenv("HARNESS_DURABILITY", "fast")
    with pytest.raises(StoreError, match="^HARNESS_DURABILITY must be one of process-crash, power-loss; "
                                         "got 'fast'$"):
        open_store(f"sqlite:///{tmp_path / 'harness.db'}")
    assert not (tmp_path / "harness.db").exists()


def _cli_durability(argv: list[str]) -> str:
    store = open_cli_store(_parser().parse_args(argv), None)
    try:
        return store.durability
    finally:
        store.close()


def test_the_cli_takes_the_durability_from_its_flag_else_the_environment(tmp_path, monkeypatch, capsys):
    state = ["--state-dir", str(tmp_path)]
    assert _cli_durability([*state, "list"]) == "process-crash"
    assert _cli_durability([*state, "--durability", "power-loss", "list"]) == "power-loss"
    monkeypatch.setenv("HARNESS_DURABILITY", "power-loss")
    assert _cli_durability([*state, "list"]) == "power-loss"
    assert _cli_durability([*state, "--durability", "process-crash", "list"]) == "process-crash"
    with pytest.raises(SystemExit) as bad_flag:
        harness_main([*state, "--durability", "power", "list"])
    assert bad_flag.value.code == 2 and "choose from 'process-crash', 'power-loss'" in capsys.readouterr().err
    monkeypatch.setenv("HARNESS_DURABILITY", "fast")
    assert harness_main([*state, "list"]) == 2
    assert capsys.readouterr().err == ("harness: HARNESS_DURABILITY must be one of process-crash, "
                                       "power-loss; got 'fast'\n")


def _synchronous_commit(store, *, synced: bool = False) -> str:
    with store._transaction(synced=synced) as tx:
        return tx.fetchall("SHOW synchronous_commit")[0][0]


def test_postgres_keeps_the_servers_setting_but_commits_an_intent_and_power_loss_synchronously(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as admin:  # a server tuned for speed over safety
        name = admin.execute("SELECT current_database()").fetchone()[0]
        admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    default, power = open_store(pg_url), open_store(pg_url, durability="power-loss")
    try:
        assert default.durability == "process-crash"
        assert _synchronous_commit(default) == "off"
        assert _synchronous_commit(default, synced=True) == "on"  # a save that opens an intent
        assert _synchronous_commit(default) == "off"  # for that transaction only
        assert _synchronous_commit(power) == "on"
    finally:
        default.close()
        power.close()
