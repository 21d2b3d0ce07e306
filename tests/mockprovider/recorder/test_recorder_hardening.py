"""The recorder against a careless or hostile operator and client: credentials in --upstream,
paths that climb out of the upstream's base, an --out that is not a file or already holds a
recording. Each refusal is a clear message, up front; nothing secret is written or logged."""

from __future__ import annotations

import http.client
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from openai import OpenAI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mockprovider.__main__ import main as mockprovider_main
from mockprovider.app import create_app
from mockprovider.recorder import RecordingError, create_recorder, record
from mockprovider.server import serve_in_thread

HELLO = [{"role": "user", "content": "hello"}]
TOOLS = [{"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}}]
"""Offered so the mock, like a real model, may answer with a tool call."""
PASSWORD = "s3cr3t-PASS"


def _with_credentials(url: str, userinfo: str = f"user:{PASSWORD}") -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{userinfo}@{rest}"


def test_credentials_in_the_upstream_url_reach_the_upstream_and_nothing_else(tmp_path: Path):
    upstream_app = create_app(journal=5)
    out = tmp_path / "creds.json"
    with serve_in_thread(upstream_app) as upstream:
        with record(_with_credentials(upstream) + "?api_key=q-SECRET", out) as proxy:
            OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0).chat.completions.create(
                model="plan", messages=HELLO)
            served = httpx.get(f"{proxy.base_url}/models")
        (entry,) = upstream_app.state.config.journal.entries()
    assert entry.headers["authorization"].startswith("Basic ")  # the URL's credentials, sent upstream
    assert served.status_code == 200
    written = out.read_text()
    log = "\n".join(proxy.log)
    assert "recorded turn 0" in log
    for text in (written, log):
        assert PASSWORD not in text and "q-SECRET" not in text
    assert "***@127.0.0.1" in json.loads(written)["description"]
    assert "api_key=***" in json.loads(written)["description"]


def test_the_command_never_logs_the_upstream_password(tmp_path: Path):
    command = [sys.executable, "-m", "mockprovider", "record", "--port", "0",
               "--out", str(tmp_path / "o.json"),
               "--upstream", _with_credentials("http://127.0.0.1:9/v1")]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stderr.readline() if proc.stderr else ""
        finally:
            proc.terminate()
            rest = proc.communicate(timeout=10)[1]
    assert "recording proxy (record) at http://127.0.0.1:" in line
    assert ":0/v1" not in line  # the real port, not the one asked for
    port = int(line.split("127.0.0.1:")[1].split("/")[0])
    assert port > 0
    assert PASSWORD not in line + rest
    assert "http://***@127.0.0.1:9/v1" in line


def test_an_unreachable_upstream_error_does_not_quote_its_password(tmp_path: Path):
    with record(_with_credentials("http://127.0.0.1:9/v1"), tmp_path / "o.json") as proxy:
        dead = httpx.post(f"{proxy.base_url}/chat/completions", json={"model": "m", "messages": HELLO})
    assert (dead.status_code, dead.json()["error"]["code"]) == (502, "upstream_unreachable")
    assert PASSWORD not in dead.text
    assert "***@127.0.0.1:9" in dead.text


def test_a_malformed_upstream_url_is_refused_without_echoing_its_password():
    with pytest.raises(ValueError, match="must be an http") as caught:
        create_recorder(upstream=f"ftp://user:{PASSWORD}@host/v1", out="x.json")
    assert PASSWORD not in str(caught.value)


def _catch_all() -> tuple[Starlette, list[str]]:
    seen: list[str] = []

    async def anything(request: Request) -> JSONResponse:
        seen.append(request.url.path)
        return JSONResponse({"path": request.url.path, "auth": request.headers.get("authorization")})

    methods = ["GET", "POST"]
    return Starlette(routes=[Route("/{path:path}", anything, methods=methods)]), seen


def _raw_get(base_url: str, path: str) -> tuple[int, bytes]:
    """A request line sent as written: httpx and browsers would resolve the dots first."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path", [
    "/v1/../../admin/secrets", "/v1/../admin", "/v1/models/../../secrets", "/v1/%2e%2e/admin",
    "/v1/..%2Fadmin", "/v1/./../admin",
    # Dot segments other servers honour: Tomcat reads '..;' as '..', IIS reads '\\' as '/'.
    "/v1/..;/admin", "/v1/..;x=1/..;/admin", "/v1/..\\..\\admin", "/v1/models%5C..%5C..%5Cadmin",
])
def test_a_path_that_climbs_out_of_the_upstream_base_is_refused(tmp_path: Path, path: str):
    app, seen = _catch_all()
    with serve_in_thread(app) as upstream, \
            record(_with_credentials(upstream), tmp_path / "o.json") as proxy:
        status, body = _raw_get(proxy.base_url, path)
    assert status == 404
    assert json.loads(body)["error"]["code"] == "not_found"
    assert seen == []  # the upstream never saw it, credentials or not


@pytest.mark.parametrize(("path", "reached"), [
    ("/v1/models", "/v1/models"),
    ("/v1/models/../files", "/v1/files"),
    ("/v1/./models//x", "/v1/models/x"),
    ("/v1/a%3Fb", "/v1/a%3Fb"),
])
def test_paths_are_normalised_under_the_upstream_base(tmp_path: Path, path: str, reached: str):
    app, seen = _catch_all()
    with serve_in_thread(app) as upstream, record(upstream, tmp_path / "o.json") as proxy:
        status, _ = _raw_get(proxy.base_url, path)
    assert status == 200
    assert [p.replace("?", "%3F") for p in seen] == [reached]


def test_out_must_name_a_file_not_a_folder_fifo_or_device(tmp_path: Path):
    folder = tmp_path / "dir.json"
    folder.mkdir()
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    device = tmp_path / "null.json"
    device.symlink_to("/dev/null")
    cases = ((folder, "is a folder"), (fifo, "not a regular file"), (device, "not a regular file"))
    for out, problem in cases:
        with pytest.raises(RecordingError, match=problem):
            create_recorder(upstream="http://127.0.0.1:9/v1", out=out, overwrite=True)


def test_the_command_refuses_a_folder_at_start_up(tmp_path: Path):
    (tmp_path / "rec.json").mkdir()
    command = [sys.executable, "-m", "mockprovider", "record", "--upstream", "http://127.0.0.1:9/v1",
               "--out", str(tmp_path / "rec.json"), "--port", "0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert "rec.json is a folder" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_existing_recording_is_kept_unless_overwrite_or_append_is_given(tmp_path: Path):
    out = tmp_path / "kept.json"
    with serve_in_thread() as upstream:
        with record(upstream, out) as proxy:
            OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0).chat.completions.create(
                model="plan", messages=[{"role": "user", "content": "first"}])
        first = out.read_text()
        with pytest.raises(RecordingError, match="exists; pass --overwrite to replace it or --append"):
            create_recorder(upstream=upstream, out=out)
        assert out.read_text() == first

        with record(upstream, out, append=True) as proxy:
            OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0).chat.completions.create(
                model="plan", messages=[{"role": "user", "content": "second"}])
        appended = json.loads(out.read_text())
        users = {alt.get("if", {}).get("user_contains") for alt in appended["turns"][0]}
        assert users == {"first", "second"}

        with record(upstream, out, overwrite=True) as proxy:
            OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0).chat.completions.create(
                model="plan", messages=[{"role": "user", "content": "third"}])
        (only,) = json.loads(out.read_text())["turns"][0]
        assert only["if"] == {"user_contains": "third"}


def test_a_rewritten_recording_keeps_the_file_mode(tmp_path: Path):
    out = tmp_path / "mode.json"
    out.write_text(json.dumps({"name": "mode", "turns": [{"content": "old"}]}))
    out.chmod(0o640)
    with serve_in_thread() as upstream, record(upstream, out, overwrite=True) as proxy:
        OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0).chat.completions.create(
            model="plan", messages=HELLO, tools=TOOLS)
        deadline = time.monotonic() + 5
        while "old" in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "list_files" in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_overwrite_and_append_together_are_refused(tmp_path: Path):
    with pytest.raises(RecordingError, match="contradict"):
        create_recorder(upstream="http://127.0.0.1:9/v1", out=tmp_path / "x.json",
                        overwrite=True, append=True)


@pytest.mark.parametrize(("text", "problem"), [
    ('{"name": "x", "turns": [[{"if": {"tool_result_contains": "a"}, "content": "b"}]]}',
     "turn 0 has a condition the recorder did not write"),
    ("{not json", "is not a scenario file the recorder can add to"),
    ('{"turns": "none"}', "is not a scenario file the recorder can add to"),
    ("[" * 5000 + "]" * 5000, "is not a scenario file the recorder can add to"),
])
def test_append_refuses_a_file_the_recorder_did_not_write(tmp_path: Path, text: str, problem: str):
    out = tmp_path / "foreign.json"
    out.write_text(text)
    for options in ({"append": True}, {"proxy_on_miss": True}, {"strict": True}):
        with pytest.raises(RecordingError, match=problem):
            create_recorder(upstream="http://127.0.0.1:9/v1", out=out, **options)
    assert out.read_text() == text


def test_a_plain_file_of_replies_can_be_appended_to_as_the_fallback_conversation(tmp_path: Path):
    out = tmp_path / "plain.json"
    out.write_text(json.dumps({"name": "plain", "turns": [{"content": "old answer"}]}))
    with serve_in_thread() as upstream, record(upstream, out, append=True) as proxy:
        with OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
            client.chat.completions.create(model="plan", messages=[{"role": "user", "content": "new"}])
    (new, old) = json.loads(out.read_text())["turns"][0]
    assert new["if"] == {"user_contains": "new"}
    assert old == {"content": "old answer"}  # no condition: it answers any other task, as before


def test_the_command_explains_itself(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as done:
        mockprovider_main(["record", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for option in ("--upstream", "--out", "--port", "--overwrite", "--append", "--strict", "--proxy-on-miss"):
        assert option in shown


def test_the_clients_query_string_reaches_the_upstream(tmp_path: Path):
    app, seen = _catch_all()
    queries: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        queries.append(request.url.query)
        return JSONResponse({"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

    app.router.routes.insert(0, Route("/v1/chat/completions", chat, methods=["POST"]))
    with serve_in_thread(app) as upstream, record(f"{upstream}?tenant=t1", tmp_path / "q.json") as proxy:
        sent = httpx.post(f"{proxy.base_url}/chat/completions?api-version=2024-10-21",
                          json={"model": "m", "messages": HELLO})
    assert sent.status_code == 200
    assert queries == ["tenant=t1&api-version=2024-10-21"]


def test_a_conversation_a_scenario_file_cannot_name_is_skipped_and_the_recording_stays_whole(
    tmp_path: Path
):
    out = tmp_path / "surrogate.json"
    body = b'{"model": "plan", "messages": [{"role": "user", "content": "\\ud800 lone"}]}'
    call = {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}

    async def chat(request: Request) -> JSONResponse:
        # An upstream that takes the lone surrogate (the mock refuses it, as OpenAI does).
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return JSONResponse({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve_in_thread(app) as upstream, record(upstream, out) as proxy:
        sent = httpx.post(f"{proxy.base_url}/chat/completions", content=body,
                          headers={"content-type": "application/json"})
        assert sent.status_code == 200
        assert proxy.log[-1].startswith("not recorded: ") and "lone surrogate" in proxy.log[-1]
        with OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
            client.chat.completions.create(model="plan", messages=[{"role": "user", "content": "fine"}],
                                           tools=TOOLS)
    assert proxy.log[-1].startswith("recorded turn 0 (list_files) of 'fine'")
    assert json.loads(out.read_text())["turns"][0][0]["if"] == {"user_contains": "fine"}


def test_a_lone_surrogate_in_the_first_user_message_is_not_recorded(tmp_path: Path):
    app = create_recorder(upstream="http://127.0.0.1:9/v1", out=tmp_path / "s.json")
    line = app.state.recorder.recording.add("a\ud800", 0, "m\udfff", {"content": "ok"})
    assert line.startswith("not recorded: ") and "lone surrogate" in line
    line = app.state.recorder.recording.add("b", 0, "m\udfff", {"content": "ok"})
    assert line.startswith("recorded turn 0")
    assert "m\\udfff" in json.loads((tmp_path / "s.json").read_text())["description"]


@pytest.mark.parametrize("upstream", [
    f"htp://user:{PASSWORD}@x@host/v1",  # a typo in the scheme, an '@' in the password
    f"http://user:{PASSWORD}/x@host/v1",  # an unencoded '/' in the password
    f"http://user:{PASSWORD}?x@host/v1",
    f"ftp://host/v1?key={PASSWORD}",  # a key in the query of a URL that is refused
    f"ftp://host/v1?a=1&api-key={PASSWORD}",
])
def test_an_unparseable_upstream_url_is_refused_without_any_piece_of_its_credentials(upstream: str):
    with pytest.raises(ValueError, match="must be an http") as caught:
        create_recorder(upstream=upstream, out="x.json")
    message = str(caught.value)
    assert PASSWORD not in message and "x@host" not in message
    assert "host/v1" in message  # still says which URL was refused


def test_no_repr_of_the_proxy_shows_the_upstreams_credentials(tmp_path: Path):
    upstream = f"http://user:{PASSWORD}@127.0.0.1:9/v1?api-key={PASSWORD}Q"
    with record(upstream, tmp_path / "o.json") as proxy:
        shown = repr(proxy)
    assert PASSWORD not in shown
    assert "127.0.0.1:9" in shown


def _ask(proxy, text: str) -> None:
    with OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
        client.chat.completions.create(model="plan", messages=[{"role": "user", "content": text}])


def test_two_proxies_recording_into_one_file_lose_no_conversation(tmp_path: Path):
    out = tmp_path / "shared.json"
    with serve_in_thread() as upstream, record(upstream, out) as first:
        _ask(first, "one")
        with record(upstream, out, append=True) as second:
            _ask(second, "two")
            _ask(first, "three")  # its save must keep what the other proxy wrote meanwhile
            _ask(second, "four")
    users = {alt["if"]["user_contains"] for alt in json.loads(out.read_text())["turns"][0]}
    assert users == {"one", "two", "three", "four"}


def test_overwrite_still_starts_a_new_recording(tmp_path: Path):
    out = tmp_path / "fresh.json"
    with serve_in_thread() as upstream:
        with record(upstream, out) as proxy:
            _ask(proxy, "old")
        with record(upstream, out, overwrite=True) as proxy:
            _ask(proxy, "new")
    users = [alt["if"]["user_contains"] for alt in json.loads(out.read_text())["turns"][0]]
    assert users == ["new"]


def test_append_keeps_what_a_hand_edited_recording_adds(tmp_path: Path):
    out = tmp_path / "edited.json"
    with serve_in_thread() as upstream:
        with record(upstream, out) as proxy:
            _ask(proxy, "slow")
        doc = json.loads(out.read_text())
        doc["options"] = "latency=5"
        doc["after_last"] = "repeat"
        doc["turns"][0][0]["latency"] = 50
        doc["turns"].append([{"if": {"user_contains": "slow"}, "error": {"status": 429, "message": "busy"}}])
        out.write_text(json.dumps(doc))
        with record(upstream, out, append=True) as proxy:
            _ask(proxy, "fast")
    kept = json.loads(out.read_text())
    assert (kept["options"], kept["after_last"]) == ("latency=5", "repeat")
    slow = next(alt for alt in kept["turns"][0] if alt["if"]["user_contains"] == "slow")
    assert slow["latency"] == 50
    busy = {"if": {"user_contains": "slow"}, "error": {"status": 429, "message": "busy"}}
    assert kept["turns"][1] == [busy]
    with serve_in_thread(scenario_files=[out]) as replay:  # still a file --scenarios loads
        assert httpx.get(f"{replay}/models").status_code == 200


def test_append_keeps_the_scenario_name_the_file_gives_unless_name_is_passed(tmp_path: Path):
    out = tmp_path / "session.json"
    with serve_in_thread() as upstream:
        with record(upstream, out, name="chosen") as proxy:
            _ask(proxy, "first")
        with record(upstream, out, append=True) as proxy:
            _ask(proxy, "second")
        assert json.loads(out.read_text())["name"] == "chosen"
        with record(upstream, out, append=True, name="renamed") as proxy:
            _ask(proxy, "third")
        assert json.loads(out.read_text())["name"] == "renamed"


@pytest.mark.parametrize("query", [
    "sv=2022-11-02&sig=THE-SECRET",  # an Azure SAS token
    "code=THE-SECRET",  # an Azure Functions key
    "X-Amz-Credential=AKIA%2FTHE-SECRET&X-Amz-Signature=THE-SECRET",  # an S3 presigned URL
])
def test_query_parameters_that_carry_a_signature_or_function_key_are_masked(tmp_path: Path, query: str):
    with record(f"http://127.0.0.1:9/v1?{query}", tmp_path / "o.json") as proxy:
        dead = httpx.post(f"{proxy.base_url}/chat/completions", json={"model": "m", "messages": HELLO})
        shown = proxy.recorder.upstream.shown
    assert "THE-SECRET" not in shown + dead.text + "\n".join(proxy.log) + repr(proxy)
    assert "=***" in shown


@pytest.mark.parametrize("password", ["1", "0", "127"])
def test_a_short_password_never_masks_the_port_the_command_logs(tmp_path: Path, password: str):
    command = [sys.executable, "-m", "mockprovider", "record", "--port", "0",
               "--out", str(tmp_path / "o.json"), "--upstream", f"http://user:{password}@127.0.0.1:9/v1"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stderr.readline() if proc.stderr else ""
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
    address = line.split(" at ", 1)[1].split(" -> ", 1)[0]
    assert address.startswith("http://127.0.0.1:") and address.endswith("/v1"), line
    assert address.removeprefix("http://127.0.0.1:").removesuffix("/v1").isdigit(), line
    assert "-> http://***@127.0.0.1:9/v1" in line


def test_a_recording_reached_through_a_symlink_is_written_where_the_link_points(tmp_path: Path):
    real = tmp_path / "kept" / "session.json"
    link = tmp_path / "session.json"
    with serve_in_thread() as upstream:
        with record(upstream, real) as proxy:
            _ask(proxy, "first")
        link.symlink_to(real)
        with record(upstream, link, append=True) as proxy:
            _ask(proxy, "second")
    assert link.is_symlink()
    users = {alt["if"]["user_contains"] for alt in json.loads(real.read_text())["turns"][0]}
    assert users == {"first", "second"}


def test_an_upstreams_control_characters_reach_the_log_as_escapes(tmp_path: Path):
    # A tool's name, an error's text: an upstream's words in a log line must not drive the terminal
    # (clear the screen, set its title, forge a line).
    name = "ls\x1b]0;pwned\x07\x1b[2J\nrecorded turn 9\x9b\u2028"
    call = {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    reply = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
             "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse(reply)

    upstream_app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve_in_thread(upstream_app) as upstream, record(upstream, tmp_path / "c.json") as proxy:
        httpx.post(f"{proxy.base_url}/chat/completions", json={"model": "m", "messages": HELLO})
    (line,) = [line for line in proxy.log if "recorded turn 0" in line]
    assert not any(c in line for c in "\x1b\x07\n\x9b\u2028"), repr(line)
    assert "ls\\x1b]0;pwned\\x07\\x1b[2J\\nrecorded turn 9\\x9b\\u2028" in line
