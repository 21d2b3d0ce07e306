"""A request's headers, read once: every step that looks one up reads the same dict; and the
test a request belongs to, which a suite sharing one mock sends with each request."""

from __future__ import annotations

import re
from collections.abc import Mapping

from starlette.requests import Request
from starlette.types import Scope

from mockprovider.errors import APIError

HEADERS = "mockprovider.headers"
"""Where `header_map` keeps the dict in the scope, for a step that looks one up after the body's read."""


def header_map(request: Request) -> Mapping[bytes, bytes]:
    """The request's headers as a dict of raw (lower-case) names to values, built once per request.

    Starlette's `request.headers` decodes and scans its list on every lookup, and a request looks
    up three to six names, most of them absent (results/bench.md, speed tricks: "one dict of raw
    headers"). The first of repeated names wins, as in `Headers.get`.
    """
    return scope_headers(request.scope)


def scope_headers(scope: Scope) -> Mapping[bytes, bytes]:
    """`header_map` of a request known by its ASGI scope alone (`apis.chat_at_once`)."""
    headers = scope.get(HEADERS)
    if headers is None:
        headers = scope[HEADERS] = dict(reversed(scope["headers"]))
    return headers


def header(request: Request, name: bytes) -> str | None:
    """One header's value, decoded as Starlette decodes it; None if absent."""
    headers = request.scope.get(HEADERS) or header_map(request)
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


def declared_length(value: bytes) -> int | None:
    """A Content-Length's value, None unless it is all ASCII digits. Leading zeros are allowed
    (RFC 9110: any run of digits) and the server's HTTP parser passes thousands, which `int`
    refuses past 4,300 digits: past 20 significant digits, the first 21 stand for a value past
    any limit."""
    if not value.isdigit():
        return None
    return int(value) if len(value) < 20 else int(value.lstrip(b"0")[:21] or b"0")


TEST_ID_HEADER = b"x-test-id"
"""The per-test header, in the spelling of the peer mock (aimock's `X-Test-Id`; names are
case-insensitive): it scopes the journal, the counted attempts and a shared mock's per-test set-up
to one test of a suite that shares one mock."""
_TEST_ID = re.compile(r"[ -~]{1,200}")
"""Printable ASCII: a test's name, as suites write it (aimock's users send theirs as they are)."""
_TEST_KEY = "mockprovider.test_id"


def test_id(request: Request) -> str | None:
    """The test a request belongs to: its `x-test-id` header, else the `test=ID` item of its
    base-URL options prefix (`/o/test=ID/v1`), for clients whose headers a test cannot set; None
    for neither. A malformed one is a 400 naming where it came from."""
    scope = request.scope
    if _TEST_KEY in scope:
        return scope[_TEST_KEY]
    if "path_params" not in scope and TEST_ID_HEADER not in (scope.get(HEADERS) or header_map(request)):
        scope[_TEST_KEY] = None  # neither given (the chat lane's requests have no path parameters)
        return None
    found, param = header(request, TEST_ID_HEADER), "x-test-id"
    if found is None:
        found, param = _from_prefix(request.path_params.get("options", "")), "base_url"
    if found is not None and not _TEST_ID.fullmatch(found):
        raise APIError(400, f"Invalid test id {found[:80]!r} in {param}: 1 to 200 printable ASCII "
                       "characters.", param=param, code="invalid_test_id")
    scope[_TEST_KEY] = found
    return found


def _from_prefix(options: str) -> str | None:
    found = None
    for item in options.split("+") if "test=" in options else ():
        if item.startswith("test="):
            found = item.removeprefix("test=")
    return found
