"""Safe by default: loopback only, a token off loopback (never from argv), host names checked,
and `harness ui` itself started as a real process."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import httpx
import pytest
from ui_support import PageParts, make_runs, serve_ui, sqlite_pair

from harness.cli import main as harness_main
from harness.ui.security import LOGIN_ATTEMPTS
from harness.ui.serve import bind, guard_for, is_loopback

TOKEN = "t0ken-for-tests-only-0123456789"


def test_any_address_but_loopback_needs_a_token():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with pytest.raises(ValueError, match="--token-file FILE or \\$HARNESS_UI_TOKEN"):
        guard_for("0.0.0.0", None)
    assert guard_for("0.0.0.0", TOKEN).token == TOKEN
    assert guard_for("127.0.0.1", None).token is None


def test_the_cli_refuses_a_public_bind_without_a_token_and_takes_no_token_on_argv(tmp_path, capsys,
                                                                                   monkeypatch):
    monkeypatch.delenv("HARNESS_UI_TOKEN", raising=False)
    assert harness_main(["--state-dir", str(tmp_path), "ui", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "give a token with --token-file FILE or $HARNESS_UI_TOKEN" in capsys.readouterr().err
    with pytest.raises(SystemExit) as argv_token:
        harness_main(["--state-dir", str(tmp_path), "ui", "--token", TOKEN])
    assert argv_token.value.code == 2 and "unrecognized arguments: --token" in capsys.readouterr().err
    monkeypatch.setenv("HARNESS_UI_TOKEN", "short")
    assert harness_main(["--state-dir", str(tmp_path), "ui", "--port", "0"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err


def test_with_a_token_pages_need_the_login_cookie_or_a_bearer_header(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("p1", "plan"))
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, token=TOKEN) as url, httpx.Client(base_url=url) as browser:
        first = browser.get("/runs/p1")
        stream = browser.get("/events")
        bearer = httpx.get(url + "/runs/p1", headers={"authorization": f"Bearer {TOKEN}"})
        login = PageParts(browser.get("/login").text).forms()[""]
        wrong = browser.post("/login", data={**login, "token": "not-the-token-at-all"})
        no_csrf = browser.post("/login", data={"token": TOKEN})
        right = browser.post("/login", data={**login, "token": TOKEN})
        after = browser.get("/runs/p1")
    assert first.status_code == 303 and first.headers["location"] == "/login"
    assert stream.status_code == 401
    assert bearer.status_code == 200 and "errors.log mentions a timeout" in bearer.text
    assert wrong.status_code == 401 and no_csrf.status_code == 403
    assert right.status_code == 303 and "harness_ui_session=" in right.headers["set-cookie"]
    assert "HttpOnly" in right.headers["set-cookie"] and "SameSite=Strict" in right.headers["set-cookie"]
    assert after.status_code == 200 and "errors.log mentions a timeout" in after.text


def test_a_loopback_ui_answers_only_loopback_host_names(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer) as url:
        port = url.rsplit(":", 1)[1]
        ok = httpx.get(url + "/", headers={"host": f"localhost:{port}"})
        rebound = httpx.get(url + "/", headers={"host": f"attacker.example:{port}"})
    assert ok.status_code == 200
    assert rebound.status_code == 400 and "unknown host" in rebound.text


def test_the_address_is_listening_before_it_is_printed():
    sock = bind("127.0.0.1", 0)  # what serve.main binds, then prints, then hands to uvicorn
    try:
        with socket.create_connection(sock.getsockname(), timeout=5):
            pass  # queued in the backlog, not refused, though nothing accepts yet
    finally:
        sock.close()


def _start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    ui = subprocess.Popen([sys.executable, "-m", "harness", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
    line = ui.stdout.readline()
    match = re.match(r"harness ui: (http://\S+/)", line)
    assert match, line + ui.stderr.read()
    return ui, match.group(1)


def _stop(ui: subprocess.Popen) -> tuple[int, str]:
    ui.send_signal(signal.SIGINT)
    try:
        _, err = ui.communicate(timeout=15)
    finally:
        for stream in (ui.stdout, ui.stderr):
            stream.close()
    return ui.returncode, err


def test_harness_ui_serves_the_store_on_loopback_and_stops_on_ctrl_c(tmp_path, mock_url):
    make_runs(tmp_path, mock_url, ("d1", "destructive"))
    ui, url = _start(["--store", f"sqlite:///{tmp_path / 'harness.db'}", "ui", "--port", "0"], {})
    try:
        assert url.startswith("http://127.0.0.1:")
        page = httpx.get(url + "runs/d1", timeout=10)
    finally:
        code, err = _stop(ui)
    assert page.status_code == 200 and 'id="approve"' in page.text
    assert code == 0 and "stopped" in err


def test_harness_ui_on_all_addresses_takes_its_token_from_the_environment(tmp_path):
    ui, url = _start(["--state-dir", str(tmp_path), "ui", "--host", "0.0.0.0", "--port", "0"],
                     {"HARNESS_UI_TOKEN": TOKEN})
    try:
        local = url.replace("0.0.0.0", "127.0.0.1")
        anonymous = httpx.get(local + "runs", timeout=10, follow_redirects=False)
        allowed = httpx.get(local, timeout=10, headers={"authorization": f"Bearer {TOKEN}"})
    finally:
        _stop(ui)
    assert anonymous.status_code == 303 and anonymous.headers["location"] == "/login"
    assert allowed.status_code == 200
    assert TOKEN not in " ".join(ui.args)


def test_the_json_api_without_a_token_answers_401_for_programs_not_a_login_redirect(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, token=TOKEN) as url:
        listed, shown = httpx.get(url + "/api/runs"), httpx.get(url + "/api/runs/p1")
        allowed = httpx.get(url + "/api/runs", headers={"authorization": f"Bearer {TOKEN}"})
    for r in (listed, shown):
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in r.json()["error"]
    assert allowed.status_code == 200 and allowed.json() == []


def test_wrong_tokens_at_login_are_rate_limited_per_client_and_the_right_one_waits_too(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, token=TOKEN) as url, httpx.Client(base_url=url) as guesser:
        form = PageParts(guesser.get("/login").text).forms()[""]
        guesses = [guesser.post("/login", data={**form, "token": f"guess-{i:04d}-xxxxxxxxxxxx"}).status_code
                   for i in range(LOGIN_ATTEMPTS + 3)]
        right = guesser.post("/login", data={**form, "token": TOKEN})
    assert guesses == [401] * LOGIN_ATTEMPTS + [429] * 3
    assert right.status_code == 429 and int(right.headers["retry-after"]) > 0
    assert "harness_ui_session" not in right.headers.get("set-cookie", "")


def test_wrong_bearer_tokens_count_against_the_same_limit_as_the_login_form(tmp_path):
    reader, writer = sqlite_pair(tmp_path / "harness.db")
    with serve_ui(reader, writer=writer, token=TOKEN) as url:
        guesses = [httpx.get(url + "/api/runs", headers={"authorization": f"Bearer guess-{i}"}).status_code
                   for i in range(LOGIN_ATTEMPTS + 2)]
        right = httpx.get(url + "/api/runs", headers={"authorization": f"Bearer {TOKEN}"})
        form = httpx.post(url + "/login", data={"token": TOKEN})
    assert guesses == [401] * LOGIN_ATTEMPTS + [429] * 2
    assert right.status_code == 429 and int(right.headers["retry-after"]) > 0
    assert form.status_code in (403, 429)  # no CSRF field here; in no case a session
