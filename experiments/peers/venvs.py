"""One cached virtualenv per framework, under `.venv-peers/<name>` (gitignored).

Each holds the project's own dependencies (the kit and the mock it starts) and the framework's
pins from its pyproject extra; the project itself is not installed there, it is put on
`PYTHONPATH`. A virtualenv is reused while `pins.txt` in it matches what pyproject asks now
(and the interpreter), and rebuilt from scratch when it does not. A framework whose install
fails is reported with pip's last words, and is tried again next time.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INSTALL_TIMEOUT_S = 900


@dataclass(frozen=True, kw_only=True)
class Venv:
    python: Path | None
    """The virtualenv's interpreter; None when the install failed."""
    error: str = ""
    built: bool = False
    """False when a cached one was reused."""


def requirements(pyproject: Path, extra: str) -> list[str]:
    """The project's dependencies and the pins of `extra`, as pyproject states them."""
    project = tomllib.loads(pyproject.read_text())["project"]
    if extra not in project["optional-dependencies"]:
        raise ValueError(f"pyproject has no extra {extra!r}")
    return [*project["dependencies"], *project["optional-dependencies"][extra]]


def pins(root: Path, extra: str) -> str:
    """What a virtualenv for `extra` holds, as `pins.txt` records it: the interpreter and the pins."""
    return "\n".join([f"# {sys.version.split()[0]} {sys.base_prefix}", *requirements(root / "pyproject.toml",
                                                                                    extra)]) + "\n"


def ensure(root: Path, name: str, extra: str, log: Callable[[str], None] = print) -> Venv:
    """The virtualenv of `name` under `root/.venv-peers`, built if its pins changed."""
    folder = root / ".venv-peers" / name
    python = folder / "bin" / "python"
    wanted = pins(root, extra)
    stamp = folder / "pins.txt"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return Venv(python=python)
    log(f"{name}: building {folder.relative_to(root)} ({extra})")
    started = time.monotonic()
    venv = _build(folder, wanted)
    log(f"{name}: {'built' if venv.python else 'not built'} in {time.monotonic() - started:.0f} s")
    return venv


def _build(folder: Path, wanted: str) -> Venv:
    python = folder / "bin" / "python"
    shutil.rmtree(folder, ignore_errors=True)
    reqs = folder.parent / f"{folder.name}.requirements.txt"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                       capture_output=True, text=True, timeout=120)
        reqs.write_text(wanted)
        # The lab's own pip, aimed at the new interpreter: no pip to bootstrap in every virtualenv.
        # Byte-compiled here (two thirds of an install's CPU: agno 12 s of 19 s), as nowhere later:
        # where PYTHONDONTWRITEBYTECODE is set, every run of a card would compile its imports again.
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                               "--disable-pip-version-check", "--no-input", "-r", str(reqs)],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
    except (subprocess.SubprocessError, OSError) as e:
        return Venv(python=None, error=f"could not make the virtualenv: {e}"[:300], built=True)
    finally:
        reqs.unlink(missing_ok=True)
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if line.strip() and "is ignored" not in line]
        return Venv(python=None, error="pip install failed: " + " / ".join(tail[-3:])[:400], built=True)
    (folder / "pins.txt").write_text(wanted)
    return Venv(python=python, built=True)
