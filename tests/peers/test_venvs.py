"""One cached virtualenv per framework: reused while its pins hold, and a failed install is a row
of the card that says so, never a framework silently dropped."""

from __future__ import annotations

from pathlib import Path

from exitkit.verdict import CASES
from experiments.peers import FRAMEWORKS, Framework
from experiments.peers.__main__ import _measure
from experiments.peers.venvs import Venv, ensure, pins, requirements

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = """
[project]
name = "x"
dependencies = ["httpx>=0.27"]

[project.optional-dependencies]
peers-broken = ["this is not ][ a requirement"]
peers-fine = ["httpx>=0.27"]
"""


def test_every_framework_has_its_pins_in_a_pyproject_extra_beside_the_projects_own() -> None:
    for framework in FRAMEWORKS:
        if framework.extra is not None:
            wanted = requirements(ROOT / "pyproject.toml", framework.extra)
            assert "httpx>=0.27" in wanted and any("==" in pin for pin in wanted), framework.name


def test_a_virtualenv_is_reused_while_its_pins_hold(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    folder = tmp_path / ".venv-peers" / "fine"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("")
    (folder / "pins.txt").write_text(pins(tmp_path, "peers-fine"))
    reused = ensure(tmp_path, "fine", "peers-fine", log=lambda line: None)
    assert reused == Venv(python=folder / "bin" / "python")


def test_a_framework_that_fails_to_install_is_a_row_of_errors_that_says_so(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    venv = ensure(tmp_path, "broken", "peers-broken", log=lambda line: None)
    assert venv.python is None and venv.error.startswith("pip install failed: "), venv.error
    assert not (tmp_path / ".venv-peers" / "broken" / "pins.txt").exists()  # tried again next time
    framework = Framework(name="broken", extra="peers-broken", packages=("x",), adapters={"m:Broken": ()})
    versions, (adapters, results) = _measure(framework, venv, False, tmp_path)
    assert versions == {"install": venv.error}
    assert [a.name for a in adapters] == ["broken"]
    assert [r.case for r in results] == list(CASES)
    assert {(r.verdict, r.summary.partition(":")[0]) for r in results} == {("error", "not installed")}
    assert all("pip install failed" in r.summary for r in results)
