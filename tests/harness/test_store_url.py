"""Store URLs: a password is masked however it is spelled, as libpq would read it."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.store.masking import mask_command, mask_url


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://ann:se#cret@127.0.0.1:1/runs",  # libpq reads '#' and '?' as part of the password
        "postgresql://ann:se?cret@127.0.0.1:1/runs",
        "postgresql://ann:se?cret@127.0.0.1:1/runs?connect_timeout=1",
        "postgresql://ann:se@cret@127.0.0.1:1/runs",
        "postgresql://ann:secret@127.0.0.1:1/runs?password=secret",
        "postgresql://ann@127.0.0.1:1/runs?PassWord=secret&connect_timeout=1",
        "postgresql:ann:secret@127.0.0.1/runs",  # no "//": still a password
    ],
)
def test_a_password_is_masked_whatever_characters_it_holds(url):
    masked = mask_url(url)
    assert "cret" not in masked and "***" in masked, masked


def test_a_password_with_a_hash_never_reaches_the_terminal(tmp_path, capsys):
    url = "postgresql://ann:se#cret@127.0.0.1:1/runs"
    assert main(["--store", url, "--state-dir", str(tmp_path), "list"]) == 2
    err = capsys.readouterr().err
    assert "cret" not in err and err.startswith("harness: ")


@pytest.mark.parametrize(
    "words",
    [
        ["harness", "--store", "postgresql:///runs?host=/tmp&password=secret", "run"],  # no '@' in it
        ["harness", "--store=postgresql://db.example/runs?sslpassword=secret", "resume", "r1"],
        ["harness", "--store", "postgresql://ann:secret@db.example/runs", "list"],
    ],
)
def test_a_leases_command_line_never_holds_a_password_however_the_url_gives_it(words):
    masked = mask_command(words)
    assert "cret" not in masked and "***" in masked, masked


def test_a_command_line_without_credentials_is_recorded_unchanged():
    words = ["harness", "--state-dir", "/tmp/a?b", "run", "--task", "Which file mentions a timeout?"]
    assert mask_command(words) == " ".join(words)


@pytest.mark.parametrize(
    "given",
    ["host=/tmp dbname=runs password=secret", "host=db dbname=runs password = 'se cret' user=ann"],
)
def test_a_libpq_keyword_string_given_as_the_store_never_prints_its_password(given, tmp_path, capsys):
    # Not a URL, so it is refused: the refusal names what was given, its password masked.
    assert main(["--store", given, "--state-dir", str(tmp_path), "list"]) == 2
    err = capsys.readouterr().err
    assert "cret" not in err and "***" in err and err.startswith("harness: "), err


def test_a_url_without_credentials_is_printed_unchanged():
    url = "postgresql://ann@db.example:5432/runs?connect_timeout=3"
    assert mask_url(url) == url


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "abc", "1e400"])
def test_a_lease_length_that_is_not_a_finite_positive_number_is_refused_by_name(value, tmp_path, capsys,
                                                                                  monkeypatch):
    monkeypatch.setenv("HARNESS_LEASE_SECONDS", value)
    assert main(["--state-dir", str(tmp_path), "list"]) == 2
    err = capsys.readouterr().err
    assert "HARNESS_LEASE_SECONDS" in err and err.count("\n") == 1, err


def test_an_infinite_lease_given_in_python_is_refused():
    from harness import MemoryStore
    from harness.store import StoreError

    with pytest.raises(StoreError, match="lease_seconds"):
        MemoryStore(lease_seconds=float("inf"))


def _mount_read_only_copy(tmp_path):
    """A tmpfs holding a saved run, remounted read-only (root only; else the test is skipped)."""
    import subprocess

    from harness import SQLiteStore, new_run

    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)],
                      capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    store = SQLiteStore(folder / "harness.db")
    store.save(new_run("t", run_id="a1"))
    store.close()
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    return folder


def test_a_read_only_database_is_named_read_only_not_unusable(tmp_path, capsys):
    import subprocess

    folder = _mount_read_only_copy(tmp_path)
    try:
        assert main(["--store", f"sqlite:///{folder / 'harness.db'}", "list"]) == 2
        err = capsys.readouterr().err
        assert "read-only" in err and "not a usable SQLite database" not in err and err.count("\n") == 1, err
    finally:
        subprocess.run(["umount", str(folder)], check=True)
