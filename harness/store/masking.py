"""Credentials in store URLs are never printed: what masks them, for messages, listings and the
command line a lease records, and what masks every piece of a password in a driver's text.

A database driver quotes what it could not parse, and libpq splits a URL at the first `@` or
`/`, so a password with a raw `@` reaches an error as the tail of a "host" (`'ssword@db'`),
one with a raw `/` as a "port", one with a bad `%` escape whole. So a URL libpq would misread
is refused before any driver sees it (`check_password`), and the driver's text is scrubbed of
every piece of the password anyway (`scrub`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote

from harness.store.errors import StoreError

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


FRAGMENT = 3
"""The shortest piece of a password masked wherever it appears in a driver's text."""
_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def passwords(url: str) -> tuple[str, ...]:
    """Every spelling of every password `url` carries, longest first: the userinfo's (read to the
    last `@`, the widest reading), `password=`-style values, each as written, decoded and encoded."""
    scheme, sep, rest = url.partition("://")
    userinfo, at, _ = (rest if sep else url).rpartition("@")
    found = [userinfo.split(":", 1)[1]] if at and ":" in userinfo else []
    found += [m.group(3).strip("'") for m in _KEYWORD_SECRET.finditer(url)]
    spellings = {form for raw in found for form in (raw, unquote(raw), quote(unquote(raw), safe=""))}
    return tuple(sorted((s for s in spellings if s), key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every piece of every secret masked: any `FRAGMENT` characters of one, and any
    quoted value that is part of one, begins with its tail or ends with its head (how a driver
    quotes a password it cut in two)."""
    for secret in secrets:
        text = _QUOTED.sub(lambda m, s=secret: _quoted(m, s), text)
        text = _pieces(text, secret)
    return text


def _quoted(match: re.Match[str], secret: str) -> str:
    value = match.group(1) if match.group(1) is not None else match.group(2)
    ends = range(2, len(secret) + 1)
    touches = value and (value in secret or any(value.startswith(secret[-k:]) for k in ends)
                         or any(value.endswith(secret[:k]) for k in ends))
    quote_mark = match.group(0)[0]
    return f"{quote_mark}***{quote_mark}" if touches else match.group(0)


def _pieces(text: str, secret: str) -> str:
    n, out, i = min(len(secret), FRAGMENT), [], 0
    while i < len(text):
        j = i + n
        if j <= len(text) and text[i:j] in secret:
            while j < len(text) and text[i:j + 1] in secret:
                j += 1
            out.append("***")
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def scrub_exception(error: BaseException | None, secrets: tuple[str, ...]) -> None:
    """Mask the secrets in `error` and every exception chained to it, in place: a traceback, a
    logger or a debugger may show the chain after the store raised its own error from it."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.args = tuple(scrub(a, secrets) if isinstance(a, str) else a for a in e.args)
        todo += [e.__cause__, e.__context__]


def check_password(url: str) -> None:
    """Refuse a URL whose password libpq (or `urlsplit`) would misread (a raw `@`, `/`, `?`, `#`,
    `[`, `]`, space, or a `%` that starts no escape) before any driver sees it: the driver would
    quote what it misread, and look a piece of the password up as a host name."""
    _, sep, rest = url.partition("://")
    if not sep:
        return
    end = min((i for i in (rest.find("@"), rest.find("/")) if i >= 0), default=len(rest))
    if end < len(rest) and rest[end] == "@":  # libpq's userinfo: up to the first "@" or "/"
        password = rest[:end].partition(":")[2]
        host = re.split(r"[/?]", rest[end + 1:], maxsplit=1)[0]
        bad = "@" in host or bool(re.search(r"[?#\[\]\s]", password) or _BAD_ESCAPE.search(password))
    else:  # "user:pass/word@host": libpq reads host "user" and port "pass"
        bad = "@" in rest[end:].split("?", 1)[0] and any(
            ":" in h and not h.startswith("[") and not h.rsplit(":", 1)[1].isdigit()
            for h in rest[:end].split(","))
    if bad:
        raise StoreError(
            f"the password in store URL {mask_url(url)!r} holds a character a URL must percent-encode: "
            "write @ as %40, / as %2F, ? as %3F, # as %23, [ ] as %5B %5D, % as %25 and a space as %20 "
            "(the password is not shown); nothing was connected to"
        )
