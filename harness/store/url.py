"""One URL names a store: `sqlite:///path/harness.db` (or a bare path) or `postgresql://…`.

Credentials in a URL are never printed: every message and `harness show` use `mask_url`
(`harness.store.masking`).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.store.durability import Durability
from harness.store.errors import StoreError
from harness.store.masking import check_password, mask_url

SCHEMES = ("sqlite", "postgresql", "postgres")


def sqlite_path(url: str) -> Path:
    """The file a `sqlite:` URL names (`sqlite:///rel/path`, `sqlite:////abs/path`)."""
    parts = urlsplit(url)
    if parts.netloc or parts.query or parts.fragment:
        raise StoreError(f"malformed store URL {mask_url(url)!r}: write sqlite:///path/to/harness.db")
    path = unquote(parts.path[1:])  # sqlite:///rel/path -> rel/path, sqlite:////abs -> /abs
    if not path or path.endswith("/"):
        raise StoreError(f"malformed store URL {mask_url(url)!r}: it names no database file")
    return Path(path)


def open_store(url: str | os.PathLike[str], *, lease_seconds: float | None = None,
               durability: Durability | None = None):
    """The store `url` names; `StoreError` (one line, credentials masked) when it cannot be used.
    `durability`: what a commit survives (`harness.store.durability`; default `$HARNESS_DURABILITY`,
    else `process-crash`)."""
    text = os.fspath(url)
    if "\0" in text or "\n" in text:
        raise StoreError("malformed store URL: it contains a control character")
    scheme = text.split(":", 1)[0].lower() if "://" in text else ""
    if scheme == "sqlite":
        from harness.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(text), lease_seconds=lease_seconds, durability=durability)
    if scheme in ("postgresql", "postgres"):
        from harness.store.postgres import PostgresStore

        check_password(text)  # before anything splits it: a raw "?" or "#" would cut it short
        if not urlsplit(text).path.strip("/") and "dbname=" not in text:
            raise StoreError(f"malformed store URL {mask_url(text)!r}: name the database (postgresql://host/NAME)")
        return PostgresStore(text, lease_seconds=lease_seconds, durability=durability)
    if scheme:
        raise StoreError(f"unknown store URL scheme {scheme!r} in {mask_url(text)!r}; "
                         "use sqlite:///path/harness.db or postgresql://user@host/dbname")
    raise StoreError(f"malformed store URL {mask_url(text)!r}; use sqlite:///path/harness.db or "
                     "postgresql://user@host/dbname")
