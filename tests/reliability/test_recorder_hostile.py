"""Odd but valid upstream replies through the recorder: each reaches the client byte for byte,
with its status and content type, streamed or not, and is recorded as it came or skipped with a
log line; never a cut stream or a 500. The upstream is a real loopback server that answers
whatever bytes a test gives it."""

from __future__ import annotations

import contextlib
import gzip
import json
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from mockprovider.recorder import MAX_DEPTH, MAX_REPLY_BYTES, Stream, record
from mockprovider.recorder import proxy as proxy_module
from mockprovider.recorder import replies as replies_module
from mockprovider.server import serve_in_thread

ASK = {"model": "m", "messages": [{"role": "user", "content": "go"}]}


@dataclass
class Script:
    """What the upstream answers next: status, content type and body chunks (one = not chunked)."""

    status: int = 200
    media: str = "application/json"
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


def _upstream(script: Script) -> Starlette:
    async def answer(request: Request) -> Response:
        await request.body()
        headers = {"content-type": script.media, **script.headers}
        if len(script.chunks) == 1:
            return Response(script.chunks[0], status_code=script.status, headers=headers)

        async def chunks() -> Iterator[bytes]:
            for chunk in script.chunks:
                yield chunk

        return StreamingResponse(chunks(), status_code=script.status, headers=headers)

    return Starlette(routes=[Route("/v1/{path:path}", answer, methods=["GET", "POST"])])


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory):
    """(script, proxy): change the script, then send through the proxy."""
    script = Script()
    out = tmp_path_factory.mktemp("hostile") / "hostile.json"
    with serve_in_thread(_upstream(script)) as upstream, record(upstream, out) as proxy:
        yield script, proxy


def _through(proxy, path: str = "chat/completions", body: dict | None = None) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}/{path}", json=body or ASK, timeout=30)


def _sse(*events: dict | str) -> list[bytes]:
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events]


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _message(message: dict) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).encode()


ODD_WHOLE = {
    "tool_calls is a number": _message({"role": "assistant", "content": None, "tool_calls": 7}),
    "a numeric tool name": _message({"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": 42, "arguments": "{}"}}]}),
    "arguments as an object": _message({"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}]}),
    "content is a list": _message({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
    "message is a string": _message("hello"),  # type: ignore[arg-type]
    "choices is an object": b'{"choices": {"0": 1}}',
    "no choices": b'{"id": "x"}',
    "a bare array": b"[1, 2, 3]",
    "NaN and a huge number": b'{"choices": [{"message": {"content": "n"}}], "x": NaN, "y": 1e999}',
    "not JSON at all": b"<html>ok</html>",
    "empty": b"",
    "deep nesting": b'{"choices": [{"message": {"content": "deep"}}], "x": ' + b"[" * 100_000 + b"]" * 100_000
    + b"}",
}


@pytest.mark.parametrize("case", ODD_WHOLE)
def test_an_odd_whole_reply_reaches_the_client_byte_for_byte(scripted, case: str):
    script, proxy = scripted
    script.status, script.media, script.chunks = 200, "application/json", [ODD_WHOLE[case]]
    before = len(proxy.log)
    response = _through(proxy)
    assert (response.status_code, response.content) == (200, ODD_WHOLE[case])
    assert response.headers["content-type"] == "application/json"
    (line,) = proxy.log[before:]  # recorded, or skipped with a reason: one line either way
    assert line.startswith(("recorded turn 0", "not recorded: "))
    assert "Traceback" not in line


def test_arguments_that_come_as_an_object_are_recorded_as_they_came(scripted):
    script, proxy = scripted
    script.status, script.media = 200, "application/json"
    script.chunks = [ODD_WHOLE["arguments as an object"]]
    _through(proxy)
    assert proxy.log[-1].startswith("recorded turn 0 (ls)")
    turns = json.loads(proxy.out.read_text())["turns"]
    assert turns[0][0]["tool_calls"] == [{"name": "ls", "arguments": {"path": "."}, "id": "c"}]


def test_a_reply_nested_past_the_limit_is_skipped_with_its_depth(scripted):
    script, proxy = scripted
    script.chunks = [ODD_WHOLE["deep nesting"]]
    _through(proxy)
    expected = f"not recorded: the reply nests 100001 levels deep (at most {MAX_DEPTH} are recorded)"
    assert proxy.log[-1] == expected


ODD_STREAMS = {
    "arguments as an object": _sse(_chunk({"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "ls", "arguments": {"path": "."}}}]}),
        _chunk({}, "tool_calls"),
        "[DONE]"),
    "arguments as an object, then a string": _sse(
        _chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "ls", "arguments": {"a": 1}}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "x"}}]}), _chunk({}, "stop"), "[DONE]"),
    "a numeric name": _sse(_chunk({"tool_calls": [{"index": 0, "function": {"name": 7, "arguments": ""}}]}),
                           _chunk({}, "tool_calls"), "[DONE]"),
    "tool_calls is a number": _sse(_chunk({"tool_calls": 7}), _chunk({}, "stop"), "[DONE]"),
    "delta is a list": _sse({"choices": [{"delta": [1]}]}, "[DONE]"),
    "an event that is not JSON": [b"data: {nope\n\n", *_sse(_chunk({"content": "hi"}, "stop"), "[DONE]")],
    "a comment, CRLF and an id": [b": keep-alive\r\n\r\nid: 1\r\ndata: ", json.dumps(_chunk({"content": "x"}))
                                  .encode(), b"\r\n\r\ndata: [DONE]\r\n\r\n"],
    "deep nesting": [b'data: {"x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n\n", *_sse("[DONE]")],
    "no newline at the end": [b"data: [DONE]"],
    "one byte at a time": [bytes([b]) for b in b"".join(_sse(_chunk({"content": "slow"}, "stop"), "[DONE]"))],
}


@pytest.mark.parametrize("case", ODD_STREAMS)
def test_an_odd_stream_reaches_the_client_whole_and_byte_for_byte(scripted, case: str):
    script, proxy = scripted
    script.status, script.media, script.chunks = 200, "text/event-stream", ODD_STREAMS[case]
    before = len(proxy.log)
    with httpx.stream("POST", f"{proxy.base_url}/chat/completions", json={**ASK, "stream": True},
                      timeout=30) as response:
        got = b"".join(response.iter_raw())
    assert response.status_code == 200
    assert got == b"".join(ODD_STREAMS[case])
    assert all(line.startswith(("recorded turn 0", "not recorded: ")) for line in proxy.log[before:])


@pytest.mark.parametrize(("status", "media", "body"), [
    (201, "application/json", b'{"created": true}'),
    (204, "application/json", b""),
    (400, "application/json", b'{"error": {"message": "bad"}}'),
    (429, "application/json", b'{"error": {"message": "slow down"}}'),
    (500, "text/html", b"<h1>oops</h1>"),
    (503, "text/plain", b"overloaded"),
    (200, "text/plain", b"plain words"),
    (200, "application/x-ndjson", b'{"a": 1}\n{"a": 2}\n'),
])
def test_any_status_and_content_type_pass_through_unrecorded(scripted, status: int, media: str, body: bytes):
    script, proxy = scripted
    script.status, script.media, script.chunks = status, media, [body]
    before = len(proxy.log)
    response = _through(proxy)
    assert (response.status_code, response.content) == (status, body)
    assert response.headers["content-type"].startswith(media)
    if status != 200:
        assert proxy.log[before:] == []


def test_a_compressed_reply_passes_through_compressed(scripted):
    script, proxy = scripted
    body = gzip.compress(_message({"role": "assistant", "content": "zipped"}))
    script.status, script.media, script.chunks = 200, "application/json", [body]
    script.headers = {"content-encoding": "gzip"}
    try:
        url = f"{proxy.base_url}/chat/completions"
        with httpx.Client() as client, client.stream("POST", url, json=ASK) as raw:
            got = b"".join(raw.iter_raw())
    finally:
        script.headers = {}
    assert raw.headers["content-encoding"] == "gzip"
    assert got == body
    assert proxy.log[-1] == "not recorded: the reply is gzip-encoded; passed through"


def test_a_reply_past_the_size_bound_is_passed_through_with_a_warning(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(proxy_module, "MAX_REPLY_BYTES", 10_000)
    monkeypatch.setattr(replies_module, "MAX_REPLY_BYTES", 10_000)
    whole = _message({"role": "assistant", "content": "x" * 50_000})
    stream = _sse(*[_chunk({"content": "y" * 1000}) for _ in range(50)], _chunk({}, "stop"), "[DONE]")
    script = Script(chunks=[whole])
    with serve_in_thread(_upstream(script)) as upstream, record(upstream, tmp_path / "big.json") as proxy:
        assert _through(proxy).content == whole
        script.media, script.chunks = "text/event-stream", stream
        with httpx.stream("POST", f"{proxy.base_url}/chat/completions", json={**ASK, "stream": True}) as r:
            assert b"".join(r.iter_raw()) == b"".join(stream)
    warnings = [line for line in proxy.log if line.startswith("warning:")]
    assert len(warnings) == 2
    assert all("10000 bytes (the limit of a scenario file)" in w for w in warnings)
    assert not (tmp_path / "big.json").exists()


def test_a_stream_reader_holds_nothing_once_a_reply_passes_the_bound():
    # The relay passes every byte on; the reader beside it must stop keeping them, or a 64 MB
    # stream costs the proxy hundreds of MB.
    piece = b"".join(_sse(_chunk({"content": "z" * 65_536})))
    reader = Stream("chat")
    tracemalloc.start()
    try:
        for _ in range(MAX_REPLY_BYTES // len(piece) + 64):
            reader.feed(piece)
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reader.oversize
    assert kept < 4 * len(piece)
    with pytest.raises(ValueError, match="larger than"):
        reader.reply()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


REQUESTS = {
    "chat/completions": ASK,
    "responses": {"model": "m", "input": "go"},
    "messages": {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}]},
}


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=JSON, cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=6), stream=st.booleans(),
       path=st.sampled_from(sorted(REQUESTS)))
def test_any_valid_reply_passes_through_byte_for_byte(
    scripted, body, cuts: list[int], stream: bool, path: str
):
    # The reply's fields hold generated JSON where each format keeps its reply, so the recorder
    # reads (and mostly refuses) odd shapes on the way through.
    script, proxy = scripted
    shaped = {"choices": [{"message": body, "delta": body}], "output": body, "content": body, "x": body}
    data = json.dumps(shaped, ensure_ascii=False) + "\n"
    raw = (f"event: response.completed\ndata: {data}\n" if stream else data).encode()
    chunks, at = [], 0
    for cut in cuts:
        chunks.append(raw[at:at + cut])
        at += cut
    chunks = [c for c in [*chunks, raw[at:]] if c] or [raw]
    script.status, script.chunks = 200, chunks
    script.media = "text/event-stream" if stream else "application/json"
    request = {**REQUESTS[path], "stream": stream}
    with httpx.stream("POST", f"{proxy.base_url}/{path}", json=request) as response:
        got = b"".join(response.iter_raw())
    assert (response.status_code, got) == (200, raw)


@pytest.mark.parametrize("path", ["responses", "messages"])
def test_odd_replies_on_the_other_formats_pass_through(scripted, path: str):
    script, proxy = scripted
    body = {"model": "m", "input": "go"} if path == "responses" else {
        "model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}]}
    for raw in (b'{"output": 7}', b'{"content": [{"type": "tool_use", "name": 3, "input": []}]}',
                b'{"content": "text"}', b"[]"):
        script.status, script.media, script.chunks = 200, "application/json", [raw]
        response = _through(proxy, path, body)
        assert (response.status_code, response.content) == (200, raw)
        assert proxy.log[-1].startswith(("not recorded: ", "recorded turn 0"))


def _nested(depth: int, key: bytes = b"message") -> bytes:
    """A chat reply (or a chunk, with key `delta`) whose message holds `depth` nested arrays: the
    whole nests depth + 4 deep."""
    return b'{"choices":[{"%s":{"content":"d","x":%s%s}}]}' % (key, b"[" * depth, b"]" * depth)


def test_the_reply_depth_bound_holds_at_every_depth_to_2000():
    for depth in range(1, 2001):
        raw = _nested(depth)
        if depth + 4 <= MAX_DEPTH:
            assert replies_module.reply_of("chat", raw) == {"content": "d"}, depth
        else:
            with pytest.raises(replies_module.NotRecordable, match=f"nests {depth + 4} levels deep"):
                replies_module.reply_of("chat", raw)


@pytest.mark.parametrize("depth", range(MAX_DEPTH - 4 - 3, MAX_DEPTH - 4 + 4))
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_replies_around_the_depth_bound_pass_through_and_record_only_within_it(
    scripted, depth: int, stream: bool
):
    script, proxy = scripted
    raw = b"data: " + _nested(depth, b"delta") + b"\n\ndata: [DONE]\n\n" if stream else _nested(depth)
    script.status, script.chunks = 200, [raw]
    script.media = "text/event-stream" if stream else "application/json"
    url = f"{proxy.base_url}/chat/completions"
    with httpx.stream("POST", url, json={**ASK, "stream": stream}) as response:
        got = b"".join(response.iter_raw())
    assert (response.status_code, got) == (200, raw)
    within = depth + 4 <= MAX_DEPTH
    expected = "recorded turn 0" if within else f"not recorded: the reply nests {depth + 4}"
    assert proxy.log[-1].startswith(expected)


def test_a_large_whole_reply_within_the_bound_is_recorded(scripted):
    script, proxy = scripted
    body = _message({"role": "assistant", "content": "w" * (3 * 1024 * 1024)})  # parsed off the event loop
    script.status, script.media, script.chunks = 200, "application/json", [body]
    assert _through(proxy).content == body
    assert proxy.log[-1].startswith("recorded turn 0 (text)")
    assert json.loads(proxy.out.read_text())["turns"][0][0]["content"] == "w" * (3 * 1024 * 1024)


def test_the_upstreams_headers_come_back_repeated_ones_included(tmp_path: Path):
    async def answer(request: Request) -> Response:
        response = Response(_message({"role": "assistant", "content": "hi"}), media_type="application/json")
        response.raw_headers += [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"x-request-id", b"r7")]
        return response

    upstream_app = Starlette(routes=[Route("/v1/chat/completions", answer, methods=["POST"])])
    with serve_in_thread(upstream_app) as upstream, record(upstream, tmp_path / "h.json") as proxy:
        response = _through(proxy)
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.headers["x-request-id"] == "r7"
    assert response.headers["content-length"] == str(len(response.content))


@pytest.mark.slow
def test_a_stream_far_past_the_bound_keeps_the_proxys_memory_flat(tmp_path: Path):
    piece = b"".join(_sse(_chunk({"content": "m" * 65_536})))
    count = (MAX_REPLY_BYTES * 4) // len(piece)  # 64 MB: four times the bound

    async def endless(request: Request) -> StreamingResponse:
        async def chunks():
            for _ in range(count):
                yield piece
            yield b"data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    upstream_app = Starlette(routes=[Route("/v1/chat/completions", endless, methods=["POST"])])
    with serve_in_thread(upstream_app) as upstream, record(upstream, tmp_path / "huge.json") as proxy:
        tracemalloc.start()
        try:
            received = 0
            url = f"{proxy.base_url}/chat/completions"
            with httpx.stream("POST", url, json={**ASK, "stream": True}) as r:
                for chunk in r.iter_raw():
                    received += len(chunk)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert received == count * len(piece) + len(b"data: [DONE]\n\n")
    # The reader holds up to the bound (a reply it may still record), then nothing: the peak
    # stays under the stream's own size, which a reader that kept everything would pass.
    assert peak < MAX_REPLY_BYTES * 3, f"peak {peak} bytes while relaying {received}"
    assert any(line.startswith("warning: a streamed reply passed") for line in proxy.log)
    assert not (tmp_path / "huge.json").exists()


def _raw_upstream(reply: bytes) -> Iterator[str]:
    """An upstream on a loopback socket that reads each request whole, sends `reply` as it is
    and hangs up: an HTTP server that dies in the middle of a reply."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        server.close()


CUT_WHOLE = {
    "a content-length body cut short": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{\"choices\":",
    "a chunked body cut between chunks": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
}


@pytest.mark.parametrize("case", list(CUT_WHOLE))
@pytest.mark.parametrize("path", ["chat/completions", "messages", "models"])
def test_an_upstream_that_hangs_up_mid_reply_is_a_502_in_the_routes_shape(
    tmp_path: Path, case: str, path: str
):
    upstream = contextlib.contextmanager(_raw_upstream)(CUT_WHOLE[case])
    with upstream as url, record(url, tmp_path / "cut.json") as proxy:
        if path == "models":
            r = httpx.get(f"{proxy.base_url}/models", timeout=30)
        else:
            r = _through(proxy, path)
    assert r.status_code == 502, r.text
    error = r.json()["error"]
    assert error["type"] in ("server_error", "api_error")
    assert "before its reply was whole" in error["message"]
    if path == "messages":
        assert r.json()["type"] == "error"  # Anthropic's shape
    assert not (tmp_path / "cut.json").exists()


def test_a_stream_whose_media_type_is_spelled_in_capitals_is_relayed_and_recorded_as_a_stream(scripted):
    script, proxy = scripted
    events = _sse(_chunk({"content": "shouted"}, "stop"), "[DONE]")
    script.status, script.media, script.chunks = 200, "Text/Event-Stream; charset=UTF-8", events
    asked = {**ASK, "stream": True, "messages": [{"role": "user", "content": "capitals"}]}
    with httpx.stream("POST", f"{proxy.base_url}/chat/completions", json=asked, timeout=30) as response:
        got = b"".join(response.iter_raw())
    assert got == b"".join(events)
    assert "transfer-encoding" in response.headers  # relayed as it came, not held and sent whole
    assert proxy.recorder.recording.lookup("capitals", 0) == {"content": "shouted"}


def test_head_through_the_proxy_carries_the_upstreams_content_length(tmp_path: Path):
    with serve_in_thread() as upstream, record(upstream, tmp_path / "head.json") as proxy:
        direct = httpx.head(f"{upstream}/models")
        through = httpx.head(f"{proxy.base_url}/models")
        whole = httpx.get(f"{proxy.base_url}/models")
    assert through.status_code == direct.status_code == 200
    assert through.headers["content-length"] == direct.headers["content-length"] == str(len(whole.content))


def test_the_upstreams_date_and_server_headers_come_back_as_they_came_not_beside_the_proxys_own(scripted):
    script, proxy = scripted
    script.status, script.media, script.chunks = 200, "application/json", [b'{"id": "x"}']
    script.headers = {"server": "the-upstream"}
    try:
        direct = httpx.get(f"{proxy.recorder.upstream.url}/models")
        through = _through(proxy, "models")
    finally:
        script.headers = {}
    assert through.headers.get_list("server") == direct.headers.get_list("server")
    assert len(through.headers.get_list("date")) == len(direct.headers.get_list("date")) == 1


def _raw_request(base_url: str, request: bytes) -> bytes:
    """`request` sent on a socket as written (no client would send these bytes); the reply."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(request)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


@pytest.mark.parametrize("path", [b"/v1/chat/completions", b"/v1/models"])
def test_a_header_value_outside_ascii_reaches_the_upstream_byte_for_byte(tmp_path: Path, path: bytes):
    got: list[bytes] = []

    async def echo(request: Request) -> Response:
        got.extend(v for k, v in request.headers.raw if k == b"x-note")
        return Response(_message({"role": "assistant", "content": "ok"}), media_type="application/json")

    upstream_app = Starlette(routes=[Route("/v1/{path:path}", echo, methods=["POST"])])
    body = json.dumps(ASK).encode()
    request = (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"X-Note: caf\xe9 \x80\xff\r\nContent-Length: " + str(len(body)).encode()
               + b"\r\nConnection: close\r\n\r\n" + body)
    with serve_in_thread(upstream_app) as upstream, record(upstream, tmp_path / "h.json") as proxy:
        reply = _raw_request(proxy.base_url, request)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert got == [b"caf\xe9 \x80\xff"]


def _anthropic_event(kind: str, data: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


BROKEN_OFF = {
    "messages": [
        _anthropic_event("message_start", {"message": {"id": "m", "type": "message", "role": "assistant",
                                                       "content": [], "usage": {"input_tokens": 3}}}),
        _anthropic_event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        _anthropic_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta",
                                                                       "text": "Half a"}}),
        _anthropic_event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ],
    "chat/completions": [
        *_sse(_chunk({"role": "assistant", "content": "Half a"})),
        *_sse({"error": {"message": "The server had an error", "type": "server_error"}}),
    ],
}


@pytest.mark.parametrize("path", list(BROKEN_OFF))
def test_a_stream_that_ends_with_an_error_instead_of_its_end_is_relayed_and_not_recorded(scripted, path: str):
    script, proxy = scripted
    script.status, script.media, script.chunks = 200, "text/event-stream", BROKEN_OFF[path]
    said = f"broken off {path}"
    asked = {**ASK, "max_tokens": 9, "stream": True, "messages": [{"role": "user", "content": said}]}
    with httpx.stream("POST", f"{proxy.base_url}/{path}", json=asked, timeout=30) as response:
        got = b"".join(response.iter_raw())
    assert got == b"".join(BROKEN_OFF[path])
    assert proxy.recorder.recording.lookup(said, 0) is None
    assert proxy.log[-1].startswith("not recorded: ")


ERRORS_WITH_200 = {
    "messages": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    "responses": {"error": {"message": "The server had an error", "type": "server_error"}},
    "chat/completions": {"error": {"message": "The server had an error", "type": "server_error"}},
}


@pytest.mark.parametrize("path", list(ERRORS_WITH_200))
def test_an_error_body_sent_with_a_200_is_passed_through_and_not_recorded_as_an_empty_reply(
    scripted, path: str
):
    script, proxy = scripted
    body = json.dumps(ERRORS_WITH_200[path]).encode()
    script.status, script.media, script.chunks = 200, "application/json", [body]
    said = f"an error in a 200 on {path}"
    messages = [{"role": "user", "content": said}]
    asked = {"model": "m", "max_tokens": 9,
             **({"input": said} if path == "responses" else {"messages": messages})}
    response = httpx.post(f"{proxy.base_url}/{path}", json=asked, timeout=30)
    assert (response.status_code, response.content) == (200, body)
    assert proxy.recorder.recording.lookup(said, 0) is None
    assert proxy.log[-1].startswith("not recorded: ")
