"""Credentials in store URLs are never printed: what masks them, for messages, listings and the
command line a lease records."""

from __future__ import annotations

import re

_KEYWORD_SECRET = re.compile(r"(?i)\b(password|passfile|sslpassword)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)")
"""A secret in libpq's keyword/value form (`password=x`, `password = 'a b'`), wherever it appears."""


def mask_url(url: str) -> str:
    """`url` with its password (and any `password=` query value) replaced by `***`.

    Split as libpq splits, not as `urlsplit` does: libpq reads `#` and `?` before the `@` as
    part of the password, so the user part runs to the last `@`; over-masking is the safe side.
    A keyword/value string (`host=db password=x`, not a URL, refused as one) is masked too.
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
    return _KEYWORD_SECRET.sub(r"\1\2***", f"{scheme}{sep}{base}{q}{query}")


def mask_command(words: list[str]) -> str:
    """A command line as one string with the password of every URL in it masked (`--store URL`,
    `--store=URL`): a lease records its holder's command, and others print it. Every word is
    masked, not only those with an `@`: libpq also takes a password as a query value."""
    return " ".join(mask_url(w) for w in words)
