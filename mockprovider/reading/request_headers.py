"""A request's headers, read once: every step that looks one up reads the same dict."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

_HEADERS = "mockprovider.headers"


def header_map(request: Request) -> Mapping[bytes, bytes]:
    """The request's headers as a dict of raw (lower-case) names to values, built once per request.

    Starlette's `request.headers` decodes and scans its list on every lookup, and a request looks
    up three to six names, most of them absent (results/bench.md, speed tricks: "one dict of raw
    headers"). The first of repeated names wins, as in `Headers.get`.
    """
    scope = request.scope
    headers = scope.get(_HEADERS)
    if headers is None:
        headers = scope[_HEADERS] = dict(reversed(scope["headers"]))
    return headers


def header(request: Request, name: bytes) -> str | None:
    """One header's value, decoded as Starlette decodes it; None if absent."""
    headers = request.scope.get(_HEADERS) or header_map(request)
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")
