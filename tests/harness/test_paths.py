"""No path the harness writes or a tool reads follows a symlink out of its folder; the CLI
refuses budgets and caps that would silently switch a limit off."""

import asyncio

import pytest

from harness import FileStore, JsonlTrace, new_run
from harness.chapter import ReadFile, make_sandbox
from harness.cli import main
from harness.trace import event


def _outside(tmp_path):
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP SECRET")
    return secret


def test_read_file_refuses_a_symlink_inside_the_sandbox(tmp_path):
    sandbox = make_sandbox(tmp_path / "sandbox")
    (sandbox / "link.log").symlink_to(_outside(tmp_path))
    with pytest.raises(ValueError, match="link.log is a symlink"):
        asyncio.run(ReadFile(sandbox).run({"path": "link.log"}, None))


def test_make_sandbox_refuses_a_symlinked_folder(tmp_path):
    secret = _outside(tmp_path)
    (tmp_path / "sandbox").symlink_to(secret.parent)
    with pytest.raises(ValueError, match="is a symlink"):
        make_sandbox(tmp_path / "sandbox")
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]


def test_make_sandbox_replaces_a_planted_symlink_instead_of_writing_through_it(tmp_path):
    secret = _outside(tmp_path)
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "notes.txt").symlink_to(secret)
    make_sandbox(tmp_path / "sandbox")
    assert secret.read_text() == "TOP SECRET"
    assert not (tmp_path / "sandbox" / "notes.txt").is_symlink()


def test_the_trace_is_never_written_through_a_symlink(tmp_path):
    secret = _outside(tmp_path)
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "r1.jsonl").symlink_to(secret)
    with pytest.raises(OSError):
        JsonlTrace(tmp_path / "traces" / "r1.jsonl").emit(event("r1", "turn"))
    (tmp_path / "linked").symlink_to(secret.parent)
    with pytest.raises(ValueError, match="is a symlink"):
        JsonlTrace(tmp_path / "linked" / "r1.jsonl")
    assert secret.read_text() == "TOP SECRET"


def test_the_state_folder_may_not_be_a_symlink(tmp_path):
    secret = _outside(tmp_path)
    (tmp_path / "state").symlink_to(secret.parent)
    with pytest.raises(ValueError, match="is a symlink"):
        FileStore(tmp_path / "state").save(new_run("t", run_id="r1"))
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize(
    "argv",
    [["run", "--budget", "nan"], ["run", "--budget", "inf"], ["run", "--budget", "-1"],
     ["run", "--budget", "nan", "--hard-budget"], ["run", "--max-turns", "-2"],
     ["run", "--scan-seconds", "inf"], ["resume", "r1", "--budget", "nan"],
     ["resume", "r1", "--max-turns", "-1"]],
    ids=lambda a: " ".join(a),
)
def test_the_cli_refuses_nan_inf_and_negative_limits(argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--state-dir", str(tmp_path), *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "finite number >= 0" in err or "is negative; a cap is a number >= 0" in err
    assert not list(tmp_path.iterdir())  # nothing saved, nothing started


def test_the_cli_refuses_a_symlinked_sandboxes_folder(mock_url, tmp_path, capsys):
    secret = _outside(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sandboxes").symlink_to(secret.parent)
    argv = ["--state-dir", str(tmp_path / "state"), "--base-url", mock_url, "run", "--run-id", "r1"]
    assert main(argv) == 2
    assert "is a symlink" in capsys.readouterr().err
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]
