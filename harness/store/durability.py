"""What a committed save survives: `process-crash` (the default) or `power-loss`.

- `process-crash`: a commit survives the harness process dying at any instant (SIGKILL, the OOM
  killer, a second Ctrl-C). SQLite runs in WAL mode with `synchronous=NORMAL`: a commit is in
  the operating system's hands when it returns, and a power cut or kernel crash may take the
  last commits with it (never corrupting the database: SQLite rolls back to an earlier commit).
  PostgreSQL keeps the server's own setting (`synchronous_commit=on` unless its administrator
  changed it).
- `power-loss`: a commit also survives the machine losing power: SQLite `synchronous=FULL`
  (the WAL is synced to disk at every commit: one fsync per save), PostgreSQL
  `synchronous_commit=on` for every session, whatever the server's default (what the server's
  disk then keeps is its own `fsync` setting's to decide: on, unless someone turned it off).

Whichever is chosen, a save that opens a write-ahead intent is committed as under `power-loss`:
the tool ledger's intent is what stops a write from running twice, so it reaches the disk before
the tool runs. A power cut under `process-crash` therefore loses at most what was committed since
the last synced commit: read-only turns are asked and run again (their tokens billed twice), a
person's decision is asked for again, and a write whose result was lost is in doubt and asked
about — never run twice.

`process-crash` is the default because it is the failure the harness's promises are about (every
SIGKILL point of a run is tested, tests/reliability/test_crash_matrix.py) and a synced commit per
turn costs more than the rest of the save; choose `power-loss` where redoing a few turns after a
power cut is not acceptable.
"""

from __future__ import annotations

import os
from typing import Literal, get_args

from harness.store.errors import StoreError

Durability = Literal["process-crash", "power-loss"]
DURABILITIES: tuple[str, ...] = get_args(Durability)
DEFAULT_DURABILITY: Durability = "process-crash"
ENV = "HARNESS_DURABILITY"
"""The environment variable naming the durability when no argument does."""


def durability_of(given: str | None) -> Durability:
    """`given`, else `$HARNESS_DURABILITY`, else the default; `StoreError` naming the choices."""
    name, value = ("durability", given) if given is not None else (ENV, os.environ.get(ENV) or "")
    if given is None and not value:
        return DEFAULT_DURABILITY
    if value not in DURABILITIES:
        raise StoreError(f"{name} must be one of {', '.join(DURABILITIES)}; got {value!r}")
    return value  # type: ignore[return-value]
