"""The machine's own programs the lab runs (runuser, initdb, pg_ctl, ...), found where Debian keeps
them even when `PATH` leaves those folders out: a user's shell often has no `/usr/sbin`, and
PostgreSQL's server binaries live in `/usr/lib/postgresql/<version>/bin`, on no `PATH` at all.
A program found nowhere is one sentence naming the package that ships it."""

from __future__ import annotations

import glob
import os
import re
import shutil

SYSTEM_FOLDERS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
"""Searched after `PATH`: where administration programs live on Debian and most other systems."""


class MissingProgram(RuntimeError):
    """A program the lab needs is not installed: the message says which package to install."""


def find_program(name: str, *, also: tuple[str, ...] = ()) -> str | None:
    """`name` on `PATH`, else in `also` (folders, globs allowed; the last match wins, so the newest
    PostgreSQL major is taken), else in the system folders; None when it is nowhere."""
    found = shutil.which(name)
    if found:
        return found
    for folder in (*also, *SYSTEM_FOLDERS):
        candidates = [c for c in sorted(glob.glob(os.path.join(folder, name)), key=_natural)
                      if os.path.isfile(c) and os.access(c, os.X_OK)]
        if candidates:
            return candidates[-1]
    return None


def require_program(name: str, *, package: str, also: tuple[str, ...] = ()) -> str:
    """`find_program`, or a `MissingProgram` naming the package to install."""
    found = find_program(name, also=also)
    if found is None:
        folders = ", ".join((*also, *SYSTEM_FOLDERS))
        raise MissingProgram(f"{name} is not installed (looked on PATH and in {folders}): "
                             f"apt-get install {package}")
    return found


def _natural(path: str) -> list[int | str]:
    """Sort key putting `/usr/lib/postgresql/15` after `/usr/lib/postgresql/9.6`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]
