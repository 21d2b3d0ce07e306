"""The server a recorder forwards to: its base URL, its credentials kept out of sight, and the
paths a client may reach under it.

Credentials in the URL (`http://user:PASS@host/v1`, or a query parameter named like a key) are
sent to the upstream only: everything the recorder writes or logs shows the URL as `shown`,
with each of them replaced by `***`, and `scrub` does the same to any text (an error message
that quotes the URL).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx

from mockprovider.journal import looks_secret

MASK = "***"
_PATH_SAFE = "!$&'()*+,;=:@-._~"
"""Characters a path segment may carry unescaped (RFC 3986 pchar); the rest is percent-encoded."""


@dataclass(frozen=True, kw_only=True)
class Upstream:
    url: httpx.URL
    """With its credentials: used to send, never shown."""
    shown: str
    """The URL with every credential replaced by `***`: for files, logs and error messages."""
    secrets: tuple[str, ...]
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
        secrets.update(v for k, v in query if looks_secret(k) and v)
        shown = url.copy_with(params=[(k, MASK if looks_secret(k) and v else v) for k, v in query] or None)
        if url.userinfo:
            shown = shown.copy_with(userinfo=MASK.encode())
        ordered = tuple(sorted(secrets, key=len, reverse=True))
        # Raw forms too: a password with '@' or '%' appears percent-encoded in the URL's text.
        ordered += tuple(quote(s, safe="") for s in ordered if quote(s, safe="") != s)
        return cls(url=url, shown=str(shown).replace("%2A%2A%2A", MASK), secrets=ordered)

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def target(self, path: str, query: bytes = b"") -> httpx.URL | None:
        """The upstream URL for `path` (the client's, after `/v1/`, percent-decoded), or None when
        its dot segments would leave the upstream's base path."""
        kept: list[str] = []
        for segment in path.split("/"):
            if segment in ("", "."):
                continue
            if segment == "..":
                if not kept:
                    return None
                kept.pop()
                continue
            kept.append(quote(segment, safe=_PATH_SAFE))
        base = self.url.raw_path.split(b"?", 1)[0].rstrip(b"/")
        raw_path = base + b"/" + "/".join(kept).encode("ascii")
        upstream_query = self.url.query
        joined = b"&".join(q for q in (upstream_query, query) if q)
        return self.url.copy_with(raw_path=raw_path + (b"?" + joined if joined else b""))


def _rough_mask(text: str) -> str:
    """A URL too broken to parse, with anything between '//' and '@' masked all the same."""
    head, sep, rest = text.partition("//")
    if sep and "@" in rest.split("/", 1)[0]:
        return f"{head}//{MASK}@{rest.split('@', 1)[1]}"
    return text
