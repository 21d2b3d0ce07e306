"""Hostile input to the mock over a real socket: a 50 MB body, slow-loris clients, deeply
nested JSON, invalid UTF-8. Each answer is a 2xx or an OpenAI-shaped 4xx, the connection is
answered rather than dropped, and the server keeps serving everyone else meanwhile."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from reliability_support import check_answer

from mockprovider.server import serve_in_thread

pytestmark = pytest.mark.slow

FIFTY_MB = 50 * 1024 * 1024
LIMIT = 1_000_000  # the mock's default body limit
OK_BODY = json.dumps({"model": "plan", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    with serve_in_thread() as url:
        parts = urlsplit(url)
        yield parts.hostname or "127.0.0.1", parts.port or 80


def _head(host: str, headers: dict[str, str]) -> bytes:
    lines = [
        "POST /v1/chat/completions HTTP/1.1",
        f"Host: {host}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(sock: socket.socket, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Read one HTTP/1.1 response (content-length or chunked) from a raw socket."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed before a response: {data[:200]!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if "content-length" in headers:
        while len(body) < int(headers["content-length"]):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    else:  # chunked: read until the terminating zero-size chunk
        while not body.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        body = _dechunk(body)
    return int(status_line.split()[1]), headers, body


def _dechunk(raw: bytes) -> bytes:
    out, rest = b"", raw
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2 :]
    return out


def _assert_413(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 413, body[:300]
    check_answer(status, headers.get("content-type", ""), body.decode())
    assert json.loads(body)["error"]["code"] == "request_too_large"


def _healthy(host: str, port: int) -> None:
    r = httpx.get(f"http://{host}:{port}/healthz", timeout=5)
    assert (r.status_code, r.json()) == (200, {"status": "ok"})


def test_fifty_megabytes_get_413_before_the_body_is_read(server, ledger):
    host, port = server
    cases = 0
    # 1. Declared up front: answered from the content-length alone, after one 64 KB chunk.
    with socket.create_connection((host, port)) as sock:
        sock.sendall(_head(host, {"Content-Type": "application/json", "Content-Length": str(FIFTY_MB)}))
        sock.sendall(b"[" * 65536)
        _assert_413(*_read_response(sock))
        cases += 1
    # 2. Chunked, no length: the streaming cap answers once the limit is passed; we keep sending
    #    only until the answer is readable, and it must arrive long before 50 MB. What we count is
    #    what the kernel took, not what the server read: loopback buffers can hold tens of MB
    #    (tcp_rmem's maximum) while a busy test process gets the server's thread its turn, so the
    #    bound is half the body: proof the answer came before the body, not of bytes read.
    sent = 0
    with socket.create_connection((host, port)) as sock:
        sock.sendall(_head(host, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}))
        piece = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
        while sent < FIFTY_MB and not select.select([sock], [], [], 0.001)[0]:
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 65536
        _assert_413(*_read_response(sock))
        assert sent < FIFTY_MB // 2, f"the answer came only after {sent} bytes were sent"
        cases += 1
    # 3. An ordinary client sending all 50 MB: it is told 413, not cut off.
    with httpx.Client(timeout=30) as client:
        r = client.post(
            f"http://{host}:{port}/v1/chat/completions",
            content=b"x" * FIFTY_MB,
            headers={"content-type": "application/json"},
        )
        _assert_413(r.status_code, dict(r.headers), r.content)
        cases += 1
    _healthy(host, port)
    ledger.record(
        "mock: 50 MB body",
        "declared, chunked, httpx client",
        tried=cases,
        survived=cases,
        detail=f"413 request_too_large each time; the chunked sender was refused after {sent:,} bytes",
    )


def test_slow_loris_clients_do_not_stop_the_server_serving_others(server, ledger):
    """Twenty clients dribble their request a byte at a time; everyone else is served meanwhile."""
    host, port = server
    request = _head(host, {"Content-Type": "application/json", "Content-Length": str(len(OK_BODY))}) + OK_BODY
    slow = [socket.create_connection((host, port)) for _ in range(20)]
    done = threading.Event()
    answers: list[int] = []

    def dribble() -> None:  # ~1.5 s: one byte per socket every few ms, then read every answer
        per_byte = 1.5 / len(request)
        for i in range(len(request)):
            for sock in slow:
                sock.sendall(request[i : i + 1])
            time.sleep(per_byte)
        for sock in slow:
            answers.append(_read_response(sock)[0])
        done.set()

    sender = threading.Thread(target=dribble, daemon=True)
    sender.start()
    served = 0
    try:
        with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as client:
            while not done.is_set() and served < 400:
                r = client.post(
                    "/v1/chat/completions", content=OK_BODY, headers={"content-type": "application/json"}
                )
                assert r.status_code == 200 and r.json()["object"] == "chat.completion"
                assert client.get("/healthz").status_code == 200
                served += 1
        sender.join(timeout=30)
        assert done.is_set(), "the slow clients were never answered"
    finally:
        for sock in slow:
            sock.close()
    assert served >= 5, f"only {served} normal requests were served while the slow clients dribbled"
    assert answers == [200] * len(slow), answers
    _healthy(host, port)
    ledger.record(
        "mock: slow-loris clients",
        "20 byte-at-a-time clients vs normal traffic",
        tried=len(slow) + served,
        survived=answers.count(200) + served,
        detail=f"{served} normal request pairs served while 20 clients dribbled for ~1.5 s; "
        "each slow client then got its 200",
    )


def _nested_bodies() -> dict[str, bytes]:
    prefix = b'{"model":"plan","messages":[{"role":"user","content":"hi"}]'
    cases = {}
    for depth in (10, 100, 500, 900, 950, 990, 1_000, 5_000, 100_000, 600_000):
        arr = b"[" * depth + b"]" * depth
        obj = b'{"a":' * depth + b"1" + b"}" * depth
        cases[f"bare array x{depth}"] = arr
        cases[f"unknown param x{depth}"] = prefix + b',"extra":' + arr + b"}"
        cases[f"tool parameters x{depth}"] = (
            prefix + b',"tools":[{"type":"function","function":{"name":"x","parameters":' + obj + b"}}]}"
        )
        cases[f"content part x{depth}"] = (
            b'{"model":"plan","messages":[{"role":"user","content":[{"type":"text","text":"x","more":'
            + arr
            + b"}]}]}"
        )
        cases[f"tool call x{depth}"] = (
            b'{"model":"plan","messages":[{"role":"user","content":"x","tool_calls":[{"id":"a",'
            b'"function":{"name":"n","arguments":"{}"},"more":' + arr + b"}]}]}"
        )
    return cases


INVALID_UTF8 = {
    "lone 0xff in a string": OK_BODY.replace(b'"hi"', b'"h\xffi"'),
    "truncated sequence": OK_BODY.replace(b'"hi"', b'"h\xc3"'),
    "overlong slash": OK_BODY.replace(b'"hi"', b'"\xc0\xaf"'),
    "encoded surrogate": OK_BODY.replace(b'"hi"', b'"\xed\xa0\x80"'),
    "five-byte form": OK_BODY.replace(b'"hi"', b'"\xf8\x88\x80\x80\x80"'),
    "in the model name": OK_BODY.replace(b'"plan"', b'"pl\xfean"'),
    "in a key": OK_BODY.replace(b'"model"', b'"mo\xffdel"'),
    "whole body latin-1": '{"model":"plan","messages":[{"role":"user","content":"café"}]}'.encode("latin-1"),
    "escaped lone surrogate": OK_BODY.replace(b'"hi"', b'"\\ud800"'),
    "utf-16 body": OK_BODY.decode().encode("utf-16"),
    "bom then json": b"\xef\xbb\xbf" + OK_BODY,
}


def _post_raw(
    client: httpx.Client, body: bytes, headers: dict[str, bytes] | None = None, path: str = ""
) -> str:
    r = client.post(
        path or "/v1/chat/completions",
        content=body,
        headers={"content-type": b"application/json", **(headers or {})},
    )
    return check_answer(r.status_code, r.headers.get("content-type", ""), r.text)


def test_deeply_nested_json_is_answered_with_a_clear_status(server, ledger):
    host, port = server
    seen: dict[str, str] = {}
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=30) as client:
        for name, body in _nested_bodies().items():
            seen[name] = _post_raw(client, body)
    _healthy(host, port)
    statuses = sorted(set(seen.values()))
    assert {"200", "400", "413"} <= set(statuses), seen  # parsed when shallow, refused when not
    ledger.record(
        "mock: deeply nested JSON",
        "depth 10 to 600,000 in five places",
        tried=len(seen),
        survived=len(seen),
        detail="answers: " + ", ".join(statuses),
    )


def test_invalid_utf8_in_body_headers_and_path_gets_a_clear_status(server, ledger):
    host, port = server
    seen: dict[str, str] = {}
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=10) as client:
        for name, body in INVALID_UTF8.items():
            seen[name] = _post_raw(client, body)
        for header in ("x-mock-options", "x-lab-attempt", "authorization", "content-type"):
            seen[f"header {header}"] = _post_raw(client, OK_BODY, {header: b"\xff\xfe\xc3("})
        seen["path options"] = _post_raw(client, OK_BODY, path="/o/latency=%FF%FE/v1/chat/completions")
    _healthy(host, port)
    # A lone surrogate escape parses, but OpenAI refuses it as invalid Unicode, and so does the mock.
    assert seen["lone 0xff in a string"] == "400" and seen["escaped lone surrogate"] == "400", seen
    ledger.record(
        "mock: invalid UTF-8",
        "body, header and path bytes",
        tried=len(seen),
        survived=len(seen),
        detail="answers: " + ", ".join(sorted(set(seen.values()))),
    )
