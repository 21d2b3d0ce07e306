"""One URL names a store: `sqlite:///path/harness.db` (or a bare path) or `postgresql://…`.

Credentials in a URL are never printed: every message and `harness show` use `mask_url`.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.store.errors import StoreError

SCHEMES = ("sqlite", "postgresql", "postgres")


def mask_url(url: str) -> str:
    """`url` with its password (and any `password=` query value) replaced by `***`.

    Split as libpq splits, not as `urlsplit` does: libpq reads `#` and `?` before the `@` as
    part of the password, so the user part runs to the last `@`; over-masking is the safe side.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, at, tail = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.split(':', 1)[0]}:***@{tail}"
    base, q, query = rest.partition("?")
    if q:
        query = "&".join(
            f"{k}=***" if k.lower() in ("password", "passfile", "sslpassword") else f"{k}={v}" if sep_ else k
            for k, sep_, v in (pair.partition("=") for pair in query.split("&"))
        )
    return f"{scheme}{sep}{base}{q}{query}"


def mask_command(words: list[str]) -> str:
    """A command line as one string with the password of every URL in it masked (`--store URL`,
    `--store=URL`): a lease records its holder's command, and others print it."""
    return " ".join(mask_url(w) if "@" in w else w for w in words)


def sqlite_path(url: str) -> Path:
    """The file a `sqlite:` URL names (`sqlite:///rel/path`, `sqlite:////abs/path`)."""
    parts = urlsplit(url)
    if parts.netloc or parts.query or parts.fragment:
        raise StoreError(f"malformed store URL {mask_url(url)!r}: write sqlite:///path/to/harness.db")
    path = unquote(parts.path[1:])  # sqlite:///rel/path -> rel/path, sqlite:////abs -> /abs
    if not path or path.endswith("/"):
        raise StoreError(f"malformed store URL {mask_url(url)!r}: it names no database file")
    return Path(path)


def open_store(url: str | os.PathLike[str], *, lease_seconds: float | None = None):
    """The store `url` names; `StoreError` (one line, credentials masked) when it cannot be used."""
    text = os.fspath(url)
    if "\0" in text or "\n" in text:
        raise StoreError("malformed store URL: it contains a control character")
    scheme = text.split(":", 1)[0].lower() if "://" in text else ""
    if scheme == "sqlite":
        from harness.store.sqlite import SQLiteStore

        return SQLiteStore(sqlite_path(text), lease_seconds=lease_seconds)
    if scheme in ("postgresql", "postgres"):
        from harness.store.postgres import PostgresStore

        if not urlsplit(text).path.strip("/") and "dbname=" not in text:
            raise StoreError(f"malformed store URL {mask_url(text)!r}: name the database (postgresql://host/NAME)")
        return PostgresStore(text, lease_seconds=lease_seconds)
    if scheme:
        raise StoreError(f"unknown store URL scheme {scheme!r} in {mask_url(text)!r}; "
                         "use sqlite:///path/harness.db or postgresql://user@host/dbname")
    raise StoreError(f"malformed store URL {mask_url(text)!r}; use sqlite:///path/harness.db or "
                     "postgresql://user@host/dbname")
