"""What every request passes through: the Host check, the token, CSRF, and the response headers.

- **Host**: only the names the server was started for (loopback names by default) are
  answered, so a web page cannot reach the UI through DNS rebinding.
- **Token**: when one is configured (always, off loopback), a request carries it as
  `Authorization: Bearer …` or holds a session cookie given by `/login` for the token. Without
  it a page redirects to `/login`, and `/api/…` answers 401. `/login` and `Authorization` headers
  together take at most `LOGIN_ATTEMPTS` wrong tokens a minute from one address, then refuse it
  (429) for a while.
- **CSRF**: each browser gets a random `harness_ui_csrf` cookie (SameSite=Lax, HttpOnly);
  every form carries the same value, and a POST whose field does not match it, or whose
  `Origin` / `Sec-Fetch-Site` says it came from another site, is refused with 403.
- **Headers**: a Content-Security-Policy that runs script and style only with the page's
  nonce (fresh per response), loads nothing from another origin and allows no framing;
  `nosniff`, `Referrer-Policy: same-origin` (nothing leaks to another site, and a form's own
  POST still says where it came from), `no-store`.
"""

from __future__ import annotations

import hmac
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from harness.approvals import MAX_REASON_CHARS

CSRF_COOKIE = "harness_ui_csrf"
SESSION_COOKIE = "harness_ui_session"
SESSION_SECONDS = 12 * 3600.0
"""A session from /login lasts this long; then the token is asked for again."""
MAX_SESSIONS = 1024
"""Sessions kept at once; logging in past this ends the oldest."""
MAX_FORM_BYTES = MAX_REASON_CHARS * 12 + 16 * 1024
"""A decision is a call id, a digest and a reason of up to `MAX_REASON_CHARS` characters (each up
to 4 bytes of UTF-8, each byte up to 3 once percent-encoded): anything larger is not our form."""
OPEN_PATHS = ("/login",)
LOGIN_ATTEMPTS = 5
"""Wrong tokens one client address may give at /login per `LOGIN_WINDOW_SECONDS`; past that
every attempt from it, the right token included, is refused (429) until the window passes."""
LOGIN_WINDOW_SECONDS = 60.0
MAX_LOGIN_CLIENTS = 4096
"""Addresses whose wrong tokens are remembered; past this the oldest are forgotten."""
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
"""What `secrets.token_urlsafe(32)` makes; a cookie of any other shape is replaced, not echoed."""


class Refused(Exception):
    """A request the UI will not act on: carries the status and the sentence to show."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(kw_only=True)
class Guard:
    """The security settings of one server."""

    hosts: frozenset[str] | None
    """Host names answered (with any port); None answers every name (a token guards it)."""
    token: str | None = None
    session_seconds: float = SESSION_SECONDS
    sessions: OrderedDict[str, float] = field(default_factory=OrderedDict)
    """Each session id given by /login and when it expires, oldest first."""
    failed_logins: OrderedDict[str, list[float]] = field(default_factory=OrderedDict)
    """When each client address last gave a wrong token (the latest few), least recent first."""

    def host_allowed(self, host: str) -> bool:
        if self.hosts is None:
            return True
        name = host if host.endswith("]") else host.rsplit(":", 1)[0]
        return name.lower() in self.hosts

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def new_session(self) -> str:
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = time.monotonic() + self.session_seconds
        while len(self.sessions) > MAX_SESSIONS:  # a token holder logging in in a loop
            self.sessions.popitem(last=False)
        return sid

    def login_wait(self, client: str) -> float:
        """Seconds `client` must wait before its next try at /login (0: it may try now)."""
        now = time.monotonic()
        recent = [t for t in self.failed_logins.get(client, ()) if now - t < LOGIN_WINDOW_SECONDS]
        if len(recent) < LOGIN_ATTEMPTS:
            return 0.0
        return LOGIN_WINDOW_SECONDS - (now - recent[-LOGIN_ATTEMPTS])

    def login_failed(self, client: str) -> None:
        now = time.monotonic()
        recent = [t for t in self.failed_logins.pop(client, ()) if now - t < LOGIN_WINDOW_SECONDS]
        self.failed_logins[client] = [*recent[-LOGIN_ATTEMPTS:], now]
        while len(self.failed_logins) > MAX_LOGIN_CLIENTS:
            self.failed_logins.popitem(last=False)

    def session_valid(self, sid: str | None) -> bool:
        expires = self.sessions.get(sid) if sid else None
        if expires is None:
            return False
        if time.monotonic() < expires:
            return True
        del self.sessions[sid]
        return False


def csp(nonce: str) -> str:
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
            "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
            "frame-ancestors 'none'")


def _cookies(scope: Scope) -> dict[str, str]:
    raw = "; ".join(v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"cookie")
    jar = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # noqa: BLE001 - a malformed cookie header is no cookie
        return {}
    return {k: m.value for k, m in jar.items()}


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


def cookie(name: str, value: str, same_site: str = "Strict", *, max_age: int | None = None) -> bytes:
    age = "" if max_age is None else f"; Max-Age={max_age}"
    return f"{name}={value}; Path=/; HttpOnly; SameSite={same_site}{age}".encode("latin-1")


class GuardMiddleware:
    """Applies `Guard` to every HTTP request and sets the headers on every response."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app, self.guard = app, guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(18)
        jar = _cookies(scope)
        csrf = jar.get(CSRF_COOKIE)
        fresh_csrf = csrf is None or not TOKEN_SHAPE.fullmatch(csrf)
        if fresh_csrf:
            csrf = secrets.token_urlsafe(32)
        scope.setdefault("state", {}).update(nonce=nonce, csrf=csrf)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", csp(nonce).encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store"),
                ]
                if fresh_csrf:
                    # Lax: a link from another site must not arrive without it, or the
                    # fresh one set here would void the forms of every page already open.
                    headers.append((b"set-cookie", cookie(CSRF_COOKIE, csrf, "Lax")))
                message = {**message, "headers": headers}
            await send(message)

        refusal = self._refusal(scope, jar)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, jar: dict[str, str]) -> Response | None:
        host = _header(scope, b"host") or ""
        if not self.guard.host_allowed(host):
            return PlainTextResponse(f"unknown host {host[:100]!r}: this UI answers only the names "
                                     "it was started for (see --host)", status_code=400)
        if scope["method"] == "POST" and (why := _cross_site(scope, host)):
            return PlainTextResponse(f"refused: {why}", status_code=403)
        if self.guard.token is None:
            return None
        bearer = (_header(scope, b"authorization") or "").removeprefix("Bearer ").strip()
        client = (scope.get("client") or ("",))[0]
        guessing = bearer or (scope["method"] == "POST" and scope["path"] == "/login")
        if guessing and (wait := self.guard.login_wait(client)):  # the right token waits too
            return PlainTextResponse(f"too many wrong tokens from this address: try again in {wait:.0f} s",
                                     status_code=429, headers={"retry-after": str(max(1, round(wait)))})
        if scope["path"] in OPEN_PATHS or self.guard.session_valid(jar.get(SESSION_COOKIE)):
            return None
        if bearer:
            if self.guard.token_matches(bearer):
                return None
            self.guard.login_failed(client)
        if scope["path"].startswith("/api/"):  # a program: told so, not sent to a form
            return JSONResponse({"error": "this UI needs its token: send Authorization: Bearer TOKEN"},
                                status_code=401, headers={"www-authenticate": "Bearer"})
        if scope["method"] == "GET" and not scope["path"].endswith("/events"):
            return RedirectResponse("/login", status_code=303)
        return PlainTextResponse("this UI needs its token: open /login", status_code=401)


def _cross_site(scope: Scope, host: str) -> str | None:
    """Why a POST looks cross-site: the browser's own Sec-Fetch-Site when it sends one, else Origin."""
    site = _header(scope, b"sec-fetch-site")
    if site is not None:
        ok = site in ("same-origin", "none")
        return None if ok else f"a POST from another site (Sec-Fetch-Site: {site[:40]})"
    origin = _header(scope, b"origin")
    if origin is not None and origin != "null" and urlsplit(origin).netloc != host:
        return "a POST whose Origin is not this UI"
    if origin == "null":
        return "a POST from an opaque origin"
    return None


async def read_form(request: Request) -> dict[str, str]:
    """The POST's url-encoded fields, after checking its CSRF field; `Refused` otherwise."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise Refused(415, "a decision is posted as a form (application/x-www-form-urlencoded)")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, f"form larger than {MAX_FORM_BYTES} bytes")
    try:
        fields = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
    except UnicodeDecodeError:
        raise Refused(400, "the form is not UTF-8") from None
    expected = request.state.csrf
    given = fields.get("csrf", "")
    matches = hmac.compare_digest(given.encode(), expected.encode())
    if request.cookies.get(CSRF_COOKIE) != expected or not matches:
        raise Refused(403, "the form's CSRF token does not match this browser's: reload the page and retry")
    return fields
