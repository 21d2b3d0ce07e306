"""A /login session of `harness ui` ends: after its time, or when too many newer ones exist."""

from __future__ import annotations

import httpx
from ui_support import PageParts, serve_ui, sqlite_pair

from harness.ui import security
from harness.ui.security import Guard

TOKEN = "a-token-long-enough-for-the-ui-0123456789"


def test_a_session_is_valid_until_it_expires_and_then_forgotten(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(security.time, "monotonic", lambda: now[0])
    guard = Guard(hosts=None, token="t" * 32, session_seconds=60)
    sid = guard.new_session()
    assert guard.session_valid(sid)
    now[0] += 59
    assert guard.session_valid(sid)
    now[0] += 2
    assert not guard.session_valid(sid)
    assert sid not in guard.sessions


def test_unknown_or_missing_sessions_are_refused():
    guard = Guard(hosts=None, token="t" * 32)
    guard.new_session()
    assert not guard.session_valid("not-a-session")
    assert not guard.session_valid(None)
    assert not guard.session_valid("")


def test_logging_in_past_the_cap_ends_the_oldest_session(monkeypatch):
    monkeypatch.setattr(security, "MAX_SESSIONS", 3)
    guard = Guard(hosts=None, token="t" * 32)
    sids = [guard.new_session() for _ in range(4)]
    assert not guard.session_valid(sids[0])
    assert all(guard.session_valid(s) for s in sids[1:])


def test_the_login_cookie_says_how_long_it_lasts(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, token=TOKEN) as url, httpx.Client(base_url=url) as browser:
        login = PageParts(browser.get("/login").text).forms()[""]
        right = browser.post("/login", data={**login, "token": TOKEN})
    assert right.status_code == 303
    assert f"Max-Age={int(security.SESSION_SECONDS)}" in right.headers["set-cookie"]
