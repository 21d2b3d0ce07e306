"""The throwaway PostgreSQL server: a machine that cannot run it gets a sentence, not a traceback."""

import os

import pytest

from experiments.lab import postgres


@pytest.mark.skipif(os.geteuid() != 0, reason="the server runs as another user only when we are root")
def test_root_without_an_unprivileged_account_is_told_so(monkeypatch, tmp_path):
    monkeypatch.setattr(postgres, "USERS", ("no-such-account-for-postgres", "nor-this-one"))
    monkeypatch.setattr(postgres.tempfile, "tempdir", str(tmp_path))
    with pytest.raises(RuntimeError, match="no-such-account-for-postgres, nor-this-one"):
        with postgres.throwaway_server():
            pass
    assert list(tmp_path.iterdir()) == []  # its temporary folder is removed too


def test_missing_server_binaries_are_one_sentence_naming_the_package(monkeypatch):
    monkeypatch.setattr(postgres, "_bin", lambda name: None)
    with pytest.raises(RuntimeError, match="apt-get install postgresql"):
        with postgres.throwaway_server():
            pass
