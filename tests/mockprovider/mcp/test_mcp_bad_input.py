"""What no real client sends, sent by hand: each gets the error MCP and JSON-RPC prescribe (a
JSON-RPC error object; HTTP 400, 404 or 413 where the transport says so), never a 500, and the
server stays responsive."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from mcp_support import ACCEPT, RawSession, served, sse_messages

HEADERS = {"accept": ACCEPT, "content-type": "application/json"}


@pytest.fixture(scope="module")
def mock() -> Iterator[tuple[str, httpx.Client]]:
    with served(max_body_bytes=64 * 1024) as mock, httpx.Client(timeout=10) as client:
        yield mock.mcp_url, client


def error_of(response: httpx.Response) -> dict:
    (message,) = sse_messages(response)
    return message["error"]


@pytest.mark.parametrize(("body", "status", "code"), [
    (b"{not json", 400, -32700),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"', 400, -32700),
    (b'{"hello": "world"}', 400, -32600),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', 400, -32600),
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', 400, -32600),  # batches left MCP in 2025-06-18
    (b"[" * 20_000 + b"]" * 20_000, 400, -32700),
    (b'"just a string"', 400, -32600),
])
def test_malformed_json_rpc_is_refused_with_a_json_rpc_error(mock, body, status, code):
    url, client = mock
    response = client.post(url, content=body, headers=HEADERS)
    assert response.status_code == status
    assert error_of(response)["code"] == code


def test_a_request_before_initialize_is_refused_with_400_and_an_unknown_session_with_404(mock):
    url, client = mock
    early = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=HEADERS)
    assert early.status_code == 400 and error_of(early)["code"] == -32600
    assert "session" in error_of(early)["message"].lower()
    unknown = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                          headers={**HEADERS, "mcp-session-id": "no-such-session"})
    assert unknown.status_code == 404 and error_of(unknown)["code"] == -32600


def test_unknown_methods_unknown_tools_and_bad_params_are_json_rpc_errors_in_a_live_session(mock):
    url, client = mock
    session = RawSession(client, url)
    assert session.call("tools/frobnicate")["error"]["code"] == -32601
    unknown = session.call("tools/call", {"name": "no_such_tool", "arguments": {}})["error"]
    assert unknown["code"] == -32602 and "Unknown tool: 'no_such_tool'" in unknown["message"]
    assert session.call("tools/call", {"arguments": {}})["error"]["code"] == -32602  # no name
    assert session.call("tools/list", {"cursor": "x" * 5000})["error"]["code"] == -32602
    assert session.call("tools/list", {"cursor": "99999"})["error"]["code"] == -32602
    assert session.call("resources/read", {"uri": "file:///../../etc/passwd"})["error"]["code"] == -32002
    assert session.call("ping") == {"jsonrpc": "2.0", "id": session.next_id, "result": {}}


def test_oversized_arguments_are_refused_with_413_and_big_ones_under_the_limit_are_served(mock):
    url, client = mock
    session = RawSession(client, url)
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "read_file"}}
    huge = session.post({**call, "params": {**call["params"], "arguments": {"path": "x" * 100_000}}})
    assert huge.status_code == 413
    padded = {"path": "errors.log" + " " * 50_000}
    big = session.post({**call, "params": {**call["params"], "arguments": padded}})
    assert big.status_code == 200
    assert sse_messages(big)[-1]["result"]["content"][0]["text"].startswith("worker 7")


def test_deeply_nested_arguments_are_answered_not_crashed_on(mock):
    url, client = mock
    session = RawSession(client, url)
    nested: dict = {}
    inner = nested
    for _ in range(5_000):
        inner["a"] = {}
        inner = inner["a"]
    body = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":' \
        + b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"}}"
    response = client.post(url, content=body, headers=session.headers())
    assert response.status_code in (200, 400)
    assert "error" in sse_messages(response)[-1] or sse_messages(response)[-1]["result"]


def test_another_protocol_era_and_the_wrong_headers_get_the_transport_s_errors(mock):
    url, client = mock
    modern = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "server/discover"},
                         headers={**HEADERS, "mcp-protocol-version": "2026-07-28"})
    assert modern.status_code == 400
    assert error_of(modern)["code"] == -32022 and "2025-11-25" in error_of(modern)["data"]["supported"]
    no_sse = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                         headers={"accept": "application/json", "content-type": "application/json"})
    assert no_sse.status_code == 406
    text = client.post(url, content=b"{}", headers={"accept": ACCEPT, "content-type": "text/plain"})
    assert text.status_code in (400, 415)
    assert client.put(url, content=b"{}", headers=HEADERS).status_code == 405
    missing = client.post(url + "/no_such_scenario", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers=HEADERS)
    assert missing.status_code == 404 and "not a scenario of this server" in error_of(missing)["message"]


def test_older_clients_negotiate_their_own_revision_and_unknown_ones_get_the_latest(mock):
    url, client = mock
    assert RawSession(client, url, version="2024-11-05").version == "2024-11-05"
    assert RawSession(client, url, version="2025-03-26").version == "2025-03-26"
    assert RawSession(client, url, version="1999-01-01").version == "2025-11-25"
    old = RawSession(client, url, version="2024-11-05")
    scanned = old.call("tools/call", {"name": "scan", "arguments": {}})["result"]
    assert scanned["content"][0]["text"] == "scanned 1200 files"


def test_healthz_answers_while_tools_hang_and_bad_requests_pour_in(mock):
    url, client = mock
    session = RawSession(client, url)
    stop = threading.Event()

    def hang(request_id: int) -> None:
        try:
            with httpx.Client(timeout=3) as other:
                stuck = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                         "params": {"name": "stuck", "arguments": {}}}
                other.post(url, json=stuck, headers=session.headers())
        except httpx.ReadTimeout:
            pass

    def garbage() -> None:
        with httpx.Client(timeout=3) as other:
            while not stop.is_set():
                other.post(url, content=b"{" * 1000, headers=HEADERS)

    threads = [threading.Thread(target=hang, args=(i,)) for i in range(4)]
    threads.append(threading.Thread(target=garbage))
    for thread in threads:
        thread.start()
    try:
        for _ in range(20):
            assert client.get(url.removesuffix("/mcp") + "/healthz").json() == {"status": "ok"}
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_an_id_already_in_flight_in_the_session_is_refused(mock):
    url, client = mock
    session = RawSession(client, url)
    call = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "stuck", "arguments": {}}}
    with httpx.Client(timeout=10) as other, \
            other.stream("POST", url, json=call, headers=session.headers()) as first:
        assert first.status_code == 200
        again = session.post(call)
        assert again.status_code == 400 and "already taken" in error_of(again)["message"]
        assert session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": 77}}).status_code == 202
        assert sse_messages_of_stream(first)[-1]["error"]["code"] == -32800


def sse_messages_of_stream(response: httpx.Response) -> list:
    import json

    return [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
