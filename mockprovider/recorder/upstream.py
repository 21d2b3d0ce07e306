"""The server a recorder forwards to: its base URL, its credentials kept out of sight, and the
paths a client may reach under it.

Credentials in the URL (`http://user:PASS@host/v1`, or a query parameter named like a key) are
sent to the upstream only: everything the recorder writes or logs shows the URL as `shown`,
with each of them replaced by `***`, and `scrub` does the same to any text (an error message
that quotes the URL).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import httpx

from mockprovider.journal import looks_secret

MASK = "***"
_BARE = 4
"""A credential this long is masked wherever it appears; a shorter one only where a URL holds it."""
_DOTTED = re.compile(r"[;\\]")
"""What ends a path segment's name for some servers: Tomcat's ';parameters', IIS's backslash."""
_PATH_SAFE = "!$&'()*+,;=:@-._~"
"""Characters a path segment may carry unescaped (RFC 3986 pchar); the rest is percent-encoded."""


@dataclass(frozen=True, kw_only=True)
class Upstream:
    url: httpx.URL = field(repr=False)
    """With its credentials: used to send, never shown."""
    shown: str
    """The URL with every credential replaced by `***`: for files, logs and error messages."""
    secrets: tuple[str, ...] = field(repr=False)
    """The credentials as they appear in text, longest first, for `scrub`."""

    @classmethod
    def parse(cls, text: str) -> Upstream:
        """`ValueError` with the masked URL when `text` is not an http(s) base URL."""
        try:
            url = httpx.URL(text.rstrip("/"))
        except (httpx.InvalidURL, TypeError, ValueError):
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise ValueError(
                f"--upstream must be an http(s) base URL (http://HOST:PORT/v1), not {_rough_mask(text)!r}")
        secrets = {text for text in (url.password, url.username) if text}
        if url.userinfo:
            secrets.add(url.userinfo.decode("ascii", "replace"))
        query = [(k, v) for k, v in url.params.multi_items()]
        secrets.update(v for k, v in query if _secret_param(k) and v)
        shown = url.copy_with(params=[(k, MASK if _secret_param(k) and v else v) for k, v in query] or None)
        if url.userinfo:
            shown = shown.copy_with(userinfo=MASK.encode())
        ordered = tuple(sorted(secrets, key=len, reverse=True))
        # Raw forms too: a password with '@' or '%' appears percent-encoded in the URL's text.
        ordered += tuple(quote(s, safe="") for s in ordered if quote(s, safe="") != s)
        return cls(url=url, shown=str(shown).replace("%2A%2A%2A", MASK), secrets=ordered)

    @classmethod
    def nowhere(cls) -> Upstream:
        """For a strict replay, which forwards nothing: a URL that never resolves."""
        return cls(url=httpx.URL("http://replay-only.invalid/v1"), shown="(none: replay only)", secrets=())

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            if len(secret) >= _BARE:
                text = text.replace(secret, MASK)
            else:  # where a URL holds it: 'user:1@', '?key=1'; elsewhere it is every '1' in a port
                text = re.sub(rf"(?<=[:/=]){re.escape(secret)}(?=[@&#'\"\s]|$)", MASK, text)
        return text

    def target(self, path: str, query: bytes = b"", *, from_root: bool = False,
               encoded: bool = False) -> httpx.URL | None:
        """The upstream URL for `path` (the client's, after `/v1/`, percent-decoded), or None when
        its dot segments would leave the upstream's base path. `from_root`: `path` is the client's
        whole path (Gemini's `/v1beta/...`, Ollama's `/api/...`), under the base URL less its `/v1`.
        `encoded`: `path` is the client's raw path (latin-1), its escapes kept as sent (an escaped
        '/' stays inside its segment, as in a Bedrock model id's ARN)."""
        kept: list[str] = []
        for segment in path.split("/"):
            name = unquote(segment, encoding="latin-1") if encoded else segment
            if name in ("", "."):
                continue
            if name != ".." and ".." in _DOTTED.split(name.replace("/", ";")):
                return None  # '..;' and '..\' climb on servers that read ';' or a backslash as a boundary
            if name == "..":
                if not kept:
                    return None
                kept.pop()
                continue
            kept.append(quote(segment, safe=_PATH_SAFE + "%" * encoded,
                              encoding="latin-1" if encoded else None))
        base = self.url.raw_path.split(b"?", 1)[0].rstrip(b"/")
        if from_root:
            base = base.removesuffix(b"/v1")
        raw_path = base + b"/" + "/".join(kept).encode("ascii")
        upstream_query = self.url.query
        joined = b"&".join(q for q in (upstream_query, query) if q)
        return self.url.copy_with(raw_path=raw_path + (b"?" + joined if joined else b""))


def sent_path(scope: Mapping[str, Any]) -> str:
    """The request's path as the client sent it (latin-1), escapes and all, for `target(encoded=True)`:
    a Bedrock model id (an ARN) holds an escaped '/' that must stay inside its segment."""
    raw = scope.get("raw_path")
    return raw.decode("latin-1") if raw else scope["path"]


def _secret_param(name: str) -> bool:
    """A query parameter that carries a credential: named like a key, or a signature or function
    key as cloud URLs carry them (`sig`, `code`, `X-Amz-Signature`, `X-Amz-Credential`)."""
    return looks_secret(name) or name.lower() in _SIGNED or _SIGNED_PART.search(name) is not None


_SIGNED = frozenset({"sig", "code"})
_SIGNED_PART = re.compile(r"signature|credential", re.IGNORECASE)


def _rough_mask(text: str) -> str:
    """A URL too broken to parse, masked all the same: everything between '//' and the last '@'
    (a password may hold '@', '/', '?' or '#' unencoded), and the value of every query parameter
    named like a key."""
    head, sep, rest = text.partition("//")
    if sep and "@" in rest:
        rest = f"{MASK}@{rest.rpartition('@')[2]}"
    return head + sep + _QUERY_VALUE.sub(
        lambda m: m[1] + (MASK if _secret_param(m[2]) and m[3] else m[3]), rest)


_QUERY_VALUE = re.compile(r"([?&;]([^=&;#]*)=)([^&;#]*)")
