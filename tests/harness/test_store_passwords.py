"""A database password never reaches a message, whatever characters it holds: refusals, the
driver's own errors, logs, `list`, `show`, lease rows, refusals naming a holder, the UI and
exception chains — as a person typed it (percent-encoded or not) and against a real server."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import traceback
from urllib.parse import quote

import httpx
import pytest

from harness import open_store
from harness.cli import REFUSED, main
from harness.store import StoreError

PASSWORDS = ["50%off", "Zq%7kX", "Zq@7kX", "Zq/7kX", "Zq:7kX", "Zq?7kX", "Zq#7kX", "Zq 7kX", "Zqжü7kX",
             "Zq[7kX", "Zq%@/:?# жü[7kX"]
"""One password per character a URL treats specially (and non-ASCII), and all of them at once."""


def _fragments(password: str) -> set[str]:
    """Every piece of `password` no message may show: three characters of it as typed, or four of
    its percent-encoded spelling (shorter pieces of that are escapes any message may hold), but
    not three lowercase letters alone (`off` of `50%off` is a word any output may hold)."""
    encoded = quote(password, safe="")
    pieces = ({password[i:j] for i in range(len(password)) for j in range(i + 3, len(password) + 1)}
              | {encoded[i:j] for i in range(len(encoded)) for j in range(i + 4, len(encoded) + 1)})
    return {p for p in pieces if not re.fullmatch(r"[a-z]{3}", p)}


def _leaks(text: str, password: str) -> list[str]:
    return sorted(f for f in _fragments(password) if f in text)


def _with_password(url: str, spelled: str) -> str:
    return url.replace("postgresql://harness@", f"postgresql://harness:{spelled}@", 1)


def _chain(error: BaseException) -> str:
    """An exception as a traceback prints it, and every exception chained to it, printed or not."""
    text, seen, todo = "".join(traceback.format_exception(error)), set(), [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        text += f"\n{e!r} {e}"
        todo += [e.__cause__, e.__context__]
    return text


@pytest.fixture
def lookups(monkeypatch) -> list[str]:
    """Host names the process asked the resolver for; none is looked up (loopback only)."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        asked.append(str(host))
        if host not in ("127.0.0.1", "::1", "localhost", None):
            raise socket.gaierror(socket.EAI_NONAME, "name lookups are off in this test")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return asked


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("where", ["the test server", "a closed port"])
def test_a_password_as_typed_never_shows_in_any_message_nor_a_lookup(password, where, pg_url, tmp_path,
                                                                     capsys, caplog, lookups):
    caplog.set_level(logging.DEBUG)
    url = _with_password(pg_url if where == "the test server" else
                         "postgresql://harness@127.0.0.1:1/runs?connect_timeout=2", password)
    code = main(["--store", url, "--state-dir", str(tmp_path), "list"])
    out, err = capsys.readouterr()
    assert code in (0, 2) and err.count("\n") <= 1, err
    if set(password) & set("%@/?#[ "):  # refused before any driver sees it, saying how to write it
        assert code == 2 and "must percent-encode" in err and not lookups, err
    chain = ""
    try:
        open_store(url).close()
    except StoreError as e:
        chain = _chain(e)
    everything = out + err + caplog.text + chain + " ".join(lookups)
    assert _leaks(everything, password) == [], everything
    quoted = re.findall(r"\"([^\"]{2,})\"|'([^']{2,})'", err + chain)  # the driver quotes what it read
    assert not [q for pair in quoted for q in pair if q and q in password], err + chain


def _holder(url: str) -> subprocess.Popen:
    """Another process holding run d1, with the URL on its command line."""
    code = ("import sys\nfrom harness import open_store\nstore = open_store(sys.argv[1])\n"
            "with store.claim('d1'):\n    print('held', flush=True)\n    sys.stdin.readline()\n")
    child = subprocess.Popen([sys.executable, "-c", code, url, "--store", url], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "held\n", child.stderr.read()
    return child


# The whole journey for each password is the slow suite's; the fast one takes the password
# holding every special character at once.
@pytest.mark.parametrize("password", [pytest.param(p, marks=[] if p == PASSWORDS[-1] else [pytest.mark.slow])
                                      for p in PASSWORDS])
def test_an_encoded_password_never_shows_in_list_show_leases_or_refusals(password, pg_url, mock_url,
                                                                         tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    url = _with_password(pg_url, quote(password, safe=""))
    argv = ["--store", url, "--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "d1"]) == 3
    assert main([*argv, "list"]) == main([*argv, "list", "--json"]) == 0
    assert main([*argv, "show", "d1"]) == main([*argv, "show", "d1", "--json"]) == 3
    holder = _holder(url)
    try:
        assert main([*argv, "approve", "d1"]) == REFUSED
        store = open_store(url)
        with store._transaction(write=False) as tx:
            rows = json.dumps(tx.fetchall("SELECT * FROM leases"), ensure_ascii=False)
        lease = json.dumps(store.lease("d1"), ensure_ascii=False)
        store.close()
    finally:
        holder.communicate("\n")
    out, err = capsys.readouterr()
    assert "refused: run d1 is owned by process" in err and "--store" in err, err
    everything = out + err + caplog.text + rows + lease
    assert _leaks(everything, password) == [], everything


def test_the_ui_never_shows_the_password(pg_url, mock_url, tmp_path):
    password = PASSWORDS[-1]
    url = _with_password(pg_url, quote(password, safe=""))
    common = ["--store", url, "--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*common, "run", "--scenario", "destructive", "--run-id", "d1"]) == 3
    ui = subprocess.Popen([sys.executable, "-m", "harness", *common, "ui", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = ui.stdout.readline()
        address = re.match(r"harness ui: (http://\S+)/", first).group(1)
        with httpx.Client(base_url=address, timeout=30) as browser:
            pages = [browser.get(path).text for path in ("/", "/runs/d1", "/api/runs", "/api/runs/d1")]
    finally:
        ui.send_signal(signal.SIGINT)
        out, err = ui.communicate(timeout=20)
    assert any("postgresql://harness:***@" in page for page in pages)
    assert _leaks(first + out + err + "".join(pages), password) == []


def test_the_drivers_log_records_are_masked_too(pg_url, caplog):
    password = PASSWORDS[-1]
    url = _with_password(pg_url, quote(password, safe=""))
    open_store(url).close()
    caplog.set_level(logging.DEBUG)
    logging.getLogger("psycopg.pool").warning("error connecting in %r: %s", "pool-1",
                                              f'invalid token "{password}" in {url}')
    assert "pool-1" in caplog.text and _leaks(caplog.text, password) == [], caplog.text


def test_help_says_a_password_on_the_command_line_is_visible_to_every_local_user(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "visible to every local user in ps" in text and "$HARNESS_STORE" in text, text
