"""The README's first section, run as a new user runs it: from an empty folder with only `python3`,
its shell lines make a virtualenv in the user's own project and install the package from the clone
with `openai` and `pytest`; the test file it shows then passes there, and the virtualenv stays small.

pip reads the wheels `make test-slow` downloaded at install time (`.venv/wheelhouse`), with no
index: the suite never reaches the network. The clone is a copy of the tracked files, so pip's
in-tree build leaves the checkout alone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
SECTION = re.compile(r"^## Test your own agent in five minutes\n(.*?)^## ", re.S | re.M)
SAVED_AS = re.compile(r"save as `([^`]+)`[^\n]*\n\n```\w+\n(.*?)```", re.IGNORECASE | re.DOTALL)
RUN = re.compile(r"Run it with `([^`]+)`")
MEGABYTES = 100
"""The most the user's virtualenv may hold, in bytes of its files (a filesystem's blocks vary)."""


def section() -> str:
    found = SECTION.search((ROOT / "README.md").read_text())
    assert found, "README.md has no section 'Test your own agent in five minutes'"
    return found[1]


def script() -> str:
    """The section's shell lines, its file saved where the reader stands, then its run line."""
    text = section()
    (shell,) = re.findall(r"```sh\n(.*?)```", text, re.S)
    ((name, body),) = SAVED_AS.findall(text)
    (run,) = RUN.findall(text)
    return f"set -eu\n{shell}cat > {name} <<'SAVED'\n{body}SAVED\n{run}\n"


def size_mb(folder: Path) -> float:
    return sum(p.lstat().st_size for p in folder.rglob("*") if not p.is_dir()) / 1e6


def _clone(to: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)


def test_the_section_installs_into_the_users_own_project_not_the_clone():
    text = script()
    assert "pip install ~/harness-lab openai pytest" in text
    assert "-e " not in text and "[dev]" not in text.split("cat >")[0]
    assert "cd my-agent" in text


@pytest.mark.slow
def test_the_first_section_passes_from_an_empty_folder_in_a_small_virtualenv(tmp_path):
    if not (WHEELHOUSE / ".complete").exists():
        pytest.skip(f"no wheels at {WHEELHOUSE}: `make test-slow` downloads them at install time")
    home, work, bin_ = tmp_path / "home", tmp_path / "work", tmp_path / "bin"
    for folder in (home, work, bin_):
        folder.mkdir()
    _clone(home / "harness-lab")
    (bin_ / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env = {"PATH": f"{bin_}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELHOUSE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", script()], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b1 passed in ", done.stdout.splitlines()[-1]), done.stdout[-2000:]
    project = work / "my-agent"
    assert sorted(p.name for p in project.iterdir() if p.name not in (".pytest_cache", "__pycache__")) == [
        ".venv", "test_agent.py"]
    installed = subprocess.run([project / ".venv" / "bin" / "python", "-m", "pip", "list", "--format=freeze"],
                               capture_output=True, text=True, env=env, check=True).stdout
    assert "harness-lab==" in installed and "uvloop" not in installed and "psycopg" not in installed
    assert size_mb(project / ".venv") < MEGABYTES, (size_mb(project / ".venv"), installed)
    print(f"README first section: {seconds:.0f} s, virtualenv {size_mb(project / '.venv'):.1f} MB")
