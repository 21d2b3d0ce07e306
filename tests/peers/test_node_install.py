"""`make peers` installs the TypeScript/JavaScript agents as the Makefile's stamp does, and an
install that fails is the agents' row on the card, never an abort or a missing row."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from experiments.peers import Framework, node
from experiments.peers.__main__ import _measure


def _folder(tmp_path: Path, lock: bool = True) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "package.json").write_text('{"name": "agents", "private": true}')
    if lock:
        (folder / "package-lock.json").write_text('{"name": "agents", "lockfileVersion": 3, "packages": {}}')
    return folder


def test_node_modules_is_reused_while_its_stamp_is_newer_than_the_lock(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert not node.installed(folder)
    node.stamp(folder).parent.mkdir()
    node.stamp(folder).touch()
    assert node.installed(folder)
    later = time.time() + 5
    os.utime(folder / "package-lock.json", (later, later))  # the lock changed since: install again
    assert not node.installed(folder)


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not on PATH (.ci/run installs it)")
def test_an_npm_install_that_fails_is_the_frameworks_row_of_errors_saying_why(tmp_path: Path) -> None:
    folder = _folder(tmp_path, lock=False)  # `npm ci` refuses a folder without a lock, offline
    venv = node.ensure(folder, log=lambda line: None)
    assert venv.python is None
    assert venv.error.startswith("npm ci failed: ")
    assert not node.installed(folder)
    framework = Framework(name="node-x", extra=None, npm=str(folder), packages=("ai",),
                          commands={"node agent.mjs": ()})
    versions, (who, results) = _measure(framework, venv, fast=True, tmp=tmp_path)
    assert versions == {"install": venv.error}
    assert [w.name for w in who] == ["node-x"]
    assert {r.verdict for r in results} == {"error"}
    assert all(r.summary.startswith("not installed: npm ci failed") for r in results)


def test_a_version_is_read_from_the_installed_package(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    package = folder / "node_modules" / "@scope" / "pkg"
    package.mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@scope/pkg", "version": "1.2.3"}')
    assert node.version(folder, "@scope/pkg") == "1.2.3"
    assert node.version(folder, "absent") == "not installed"
