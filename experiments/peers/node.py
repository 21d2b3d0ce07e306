"""The TypeScript/JavaScript agents' packages: `node-agents/node_modules`, installed from the lock.

As the Makefile's stamp for them does: `npm ci` when `node_modules/.installed` is missing or older
than `package.json` or `package-lock.json`, then the stamp is touched. The agents run under the
lab's own interpreter (the kit drives them as commands), so a good install is the lab's `Venv`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from experiments.peers.venvs import Venv

INSTALL_TIMEOUT_S = 600


def stamp(folder: Path) -> Path:
    return folder / "node_modules" / ".installed"


def installed(folder: Path) -> bool:
    """Whether node_modules holds what the lock asks now."""
    done = stamp(folder)
    return done.exists() and all(done.stat().st_mtime >= (folder / f).stat().st_mtime
                                 for f in ("package.json", "package-lock.json"))


def ensure(folder: Path, log: Callable[[str], None] = print) -> Venv:
    """`folder`'s node_modules, installed with `npm ci` unless the stamp is current; the lab's Python."""
    if installed(folder):
        return Venv(python=Path(sys.executable))
    if shutil.which("node") is None or shutil.which("npm") is None:
        return Venv(python=None, error="node and npm are not on PATH", built=True)
    log(f"{folder.name}: npm ci")
    try:
        done = subprocess.run(["npm", "ci", "--prefix", str(folder), "--no-audit", "--no-fund",
                               "--loglevel=error"], capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S, check=False)
    except (subprocess.SubprocessError, OSError) as e:
        return Venv(python=None, error=f"npm ci failed: {e}"[:300], built=True)
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if line.strip()]
        return Venv(python=None, error="npm ci failed: " + " / ".join(tail[-3:])[:400], built=True)
    stamp(folder).touch()
    return Venv(python=Path(sys.executable), built=True)


def version(folder: Path, package: str) -> str:
    """`package`'s version as installed in `folder`'s node_modules."""
    try:
        return json.loads((folder / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "not installed"


def runtime() -> str:
    """The version of the `node` on PATH."""
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip().removeprefix("v")
    except (subprocess.SubprocessError, OSError):
        return "not installed"
