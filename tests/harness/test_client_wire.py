"""What goes on the wire: the body encoded once per message is byte for byte what httpx sends for
`json=`, the headers are httpx's own, a provider's cookie still comes back, and a plain-http
provider never loads the trust store."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys

import http_support
import httpx
import pytest
from http_support import answering, raw_server

from harness import ModelClient
from harness import client as client_module
from harness.body import TRANSCRIPTS, Bodies
from harness.model import ProviderError

OK = {
    "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}
TOOLS = [{"type": "function", "function": {"name": "list_files", "description": "Les fichiers — tous",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _httpx_json(body: dict) -> bytes:
    return httpx.Request("POST", "http://x/", json=body).content


def _call(n: int) -> list[dict]:
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "name": "list_files",
             "content": f"naïve ✓ {n}\n\"q\""}]


def test_a_growing_transcripts_body_is_the_bytes_httpx_sends_for_the_same_json():
    bodies = Bodies()
    messages = [{"role": "system", "content": "Be brief 🙂"}, {"role": "user", "content": "x"}]
    for n in range(5):
        for tools, cap in ((TOOLS, None), (None, 300), (TOOLS, 0)):
            want = {"model": "m", "messages": messages} | ({"tools": tools} if tools else {}) | (
                {} if cap is None else {"max_tokens": cap})
            assert bodies.body("m", list(messages), tools and list(tools), cap) == _httpx_json(want)
        messages += _call(n)


def test_a_message_replaced_by_another_object_is_encoded_again():
    bodies, messages = Bodies(), [{"role": "user", "content": "x"}, *_call(1), *_call(2)]
    bodies.body("m", messages, None, None)
    messages[2] = {**messages[2], "content": "edited"}
    assert json.loads(bodies.body("m", messages, None, None))["messages"] == messages
    del messages[1:]  # a shorter transcript, same first message
    assert json.loads(bodies.body("m", messages, None, None))["messages"] == messages


def test_transcripts_sent_in_turn_by_several_runs_each_keep_their_own_encoding():
    bodies = Bodies()
    runs = [[{"role": "user", "content": f"run {k}"}] for k in range(TRANSCRIPTS + 2)]
    for n in range(3):
        for messages in runs:
            messages += _call(n)
            assert bodies.body("m", messages, None, None) == _httpx_json({"model": "m", "messages": messages})


def test_a_message_that_cannot_be_encoded_fails_as_it_did_and_is_not_kept():
    bodies, messages = Bodies(), [{"role": "user", "content": "lone \ud800 surrogate"}]
    with pytest.raises(UnicodeEncodeError):
        bodies.body("m", messages, None, None)
    messages[0]["content"] = "fine"  # the same object, now encodable: nothing stale was kept
    assert json.loads(bodies.body("m", messages, None, None))["messages"] == messages


def _recording(*responses: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handler), seen


def _complete(transport: httpx.AsyncBaseTransport, times: int = 1, **headers: str) -> None:
    async def main() -> None:
        async with ModelClient("http://model.test/v1", api_key="sk-x", transport=transport) as c:
            for _ in range(times):
                await c.complete(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS,
                                 headers=headers)

    asyncio.run(main())


@pytest.mark.parametrize("path", ["lean", "the client's own (httpx's request log on)"])
def test_the_request_carries_the_headers_and_body_httpx_would_send(path, caplog):
    if path != "lean":
        caplog.set_level(logging.INFO, logger="httpx")
    transport, seen = _recording(httpx.Response(200, json=OK))
    _complete(transport, **{"x-mock-options": "latency=5"})

    async def reference() -> httpx.Request:
        async with httpx.AsyncClient(headers={"authorization": "Bearer sk-x"}) as http:
            return http.build_request("POST", "http://model.test/v1/chat/completions", headers={
                "x-mock-options": "latency=5", "x-lab-attempt": "0"},
                json={"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS})

    want = asyncio.run(reference())
    assert (seen[0].method, seen[0].url, seen[0].headers.raw, seen[0].content) == (
        want.method, want.url, want.headers.raw, want.content)
    assert bool(caplog.records) == (path != "lean")


def test_a_cookie_the_provider_sets_is_sent_back_on_the_next_request():
    transport, seen = _recording(httpx.Response(200, json=OK, headers={"set-cookie": "lb=node-3; Path=/"}),
                                 httpx.Response(200, json=OK))
    _complete(transport, times=2)
    assert ("cookie" in seen[0].headers, seen[1].headers.get("cookie")) == (False, "lb=node-3")


def test_a_plain_http_provider_never_loads_the_trust_store(monkeypatch):
    def refuse() -> None:
        raise AssertionError("the trust store was loaded for a plain-http provider")

    monkeypatch.setattr(client_module, "shared_tls", refuse)
    ModelClient("http://127.0.0.1:9/v1")  # would raise while building the client



def test_a_message_edited_in_place_after_it_was_sent_is_sent_as_it_now_reads():
    """The client's own API takes plain lists of dicts: a caller may edit one in place between
    two calls (a system prompt carrying the time, a redacted tool result), as `json=` allowed."""
    bodies = Bodies()
    messages = [{"role": "system", "content": "now: 1"}, {"role": "user", "content": "x"}, *_call(1)]
    tools = [json.loads(json.dumps(TOOLS[0]))]
    bodies.body("m", messages, tools, None)
    edits = [
        lambda: messages[0].update(content="now: 2"),  # a value replaced
        lambda: messages[2]["tool_calls"][0]["function"].update(arguments='{"a":1}'),  # deep inside
        lambda: messages[3].pop("name"),  # a key removed
        lambda: messages[1].update(flag=True),  # a key added
        lambda: messages[1].update(flag=1),  # equal to True, but not the same JSON
        lambda: messages[1].update(flag=1.0),  # equal to 1, but not the same JSON
        lambda: tools[0]["function"].update(description="changed"),
    ]
    for edit in edits:
        edit()
        want = _httpx_json({"model": "m", "messages": messages, "tools": tools})
        assert bodies.body("m", messages, tools, None) == want


def test_a_message_edited_in_place_reaches_the_provider_through_the_client():
    transport, seen = _recording(httpx.Response(200, json=OK), httpx.Response(200, json=OK))

    async def main() -> None:
        async with ModelClient("http://model.test/v1", api_key="sk-x", transport=transport) as c:
            messages = [{"role": "system", "content": "now: 1"}, {"role": "user", "content": "x"}]
            await c.complete(model="m", messages=messages)
            messages[0]["content"] = "now: 2"
            await c.complete(model="m", messages=messages)

    asyncio.run(main())
    assert [json.loads(r.content)["messages"][0]["content"] for r in seen] == ["now: 1", "now: 2"]


@pytest.mark.parametrize("api_key", [None, "sk-x"])
def test_credentials_in_the_base_url_go_as_basic_auth_as_httpx_sends_them(api_key):
    transport, seen = _recording(httpx.Response(200, json=OK))

    async def main() -> None:
        url = "http://user:pa%20ss@model.test/v1"
        async with ModelClient(url, api_key=api_key, transport=transport) as c:
            await c.complete(model="m", messages=[{"role": "user", "content": "x"}])

    asyncio.run(main())
    assert seen[0].headers.get_list("authorization") == [httpx.BasicAuth("user", "pa ss")._auth_header]


@pytest.mark.parametrize("path", ["lean", "the client's own (httpx's request log on)"])
@pytest.mark.parametrize("headers", [
    {"Host": "vhost.example"},  # a virtual host reached through another name
    {"Content-Type": "application/json; charset=utf-8"},
    {"x-lab-attempt": "7"},
    {"X-Lab-Attempt": "7"},
    {"accept": "application/json", "Authorization": "Bearer other"},
])
def test_a_call_header_the_request_also_sets_is_merged_as_httpx_merges_it(headers, path, caplog):
    """Each header once, where httpx's `json=` put it: the call's Host or Content-Type instead of
    the request's own, the attempt number in place of a call's header of the same spelling."""
    if path != "lean":
        caplog.set_level(logging.INFO, logger="httpx")
    transport, seen = _recording(httpx.Response(200, json=OK))
    _complete(transport, **headers)

    async def reference() -> httpx.Request:
        async with httpx.AsyncClient(headers={"authorization": "Bearer sk-x"}) as http:
            return http.build_request("POST", "http://model.test/v1/chat/completions",
                                      headers={**headers, "x-lab-attempt": "0"},
                                      json={"model": "m", "messages": [{"role": "user", "content": "x"}],
                                            "tools": TOOLS})

    want = asyncio.run(reference())
    assert (seen[0].headers.raw, seen[0].content) == (want.headers.raw, want.content)


def test_a_message_nested_as_deep_as_json_dumps_takes_is_sent_every_time():
    content: object = "x"
    for _ in range(900):
        content = [content]
    bodies, messages = Bodies(), [{"role": "user", "content": content}]
    want = _httpx_json({"model": "m", "messages": messages})
    assert [bodies.body("m", messages, None, None) for _ in range(2)] == [want, want]


@pytest.mark.parametrize("base", ["http://model.test/openai/deployments/d?api-version=2024-10-21",
                                  "http://model.test/openai/deployments/d/?api-version=2024-10-21"])
def test_a_query_in_the_base_url_stays_after_the_chat_completions_path(base):
    """Azure OpenAI's deployment URL carries `?api-version=`: the path goes before the query."""
    transport, seen = _recording(httpx.Response(200, json=OK))

    async def main() -> None:
        async with ModelClient(base, api_key="sk-x", transport=transport) as c:
            await c.complete(model="m", messages=[{"role": "user", "content": "x"}])

    asyncio.run(main())
    assert seen[0].url.path == "/openai/deployments/d/chat/completions"
    assert seen[0].url.params["api-version"] == "2024-10-21"


def test_our_connections_write_the_bytes_httpx_writes(caplog):
    """Ours, httpx's transport given, and httpx's whole client (its request log on): one request
    each to one raw server, byte for byte the same."""
    async def main() -> list[bytes]:
        async with raw_server(answering(*[http_support.OK] * 3)) as raw:
            for kw in ({}, {"transport": httpx.AsyncHTTPTransport()}, {}):
                if len(raw.requests) == 2:
                    caplog.set_level(logging.INFO, logger="httpx")
                async with ModelClient(raw.url + "?api-version=1", api_key="sk-x", **kw) as c:
                    assert (c._origin_pool is not None) == (not kw)
                    await c.complete(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS,
                                     headers={"x-mock-options": "latency=5", "Accept": "application/json"})
            return raw.requests

    ours, theirs, client_path = asyncio.run(main())
    assert ours == theirs == client_path
    assert ours.startswith(b"POST /v1/chat/completions?api-version=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert len(caplog.records) == 1  # the last one did go through httpx's client


def _no_proxy_env(monkeypatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.parametrize("no_proxy", [None, "127.0.0.1"])
def test_a_proxy_the_environment_names_gets_the_request_unless_no_proxy_spares_the_host(no_proxy,
                                                                                        monkeypatch):
    _no_proxy_env(monkeypatch)

    async def main() -> tuple[list[bytes], list[bytes], bool]:
        async with raw_server(answering(http_support.OK)) as proxy, \
                raw_server(answering(http_support.OK)) as origin:
            monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
            if no_proxy:
                monkeypatch.setenv("NO_PROXY", no_proxy)
            async with ModelClient(origin.url, max_retries=0) as c:
                await c.complete(model="m", messages=[{"role": "user", "content": "x"}])
                return proxy.requests, origin.requests, c._origin_pool is not None

    via_proxy, direct, ours = asyncio.run(main())
    if no_proxy:
        assert (len(via_proxy), len(direct), ours) == (0, 1, True)
        assert direct[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    else:
        assert (len(via_proxy), len(direct), ours) == (1, 0, False)
        assert re.match(rb"POST http://127\.0\.0\.1:\d+/v1/chat/completions HTTP/1\.1\r\n", via_proxy[0])


P = "http://p:1"


@pytest.mark.parametrize("env", [
    {}, {"HTTP_PROXY": P}, {"http_proxy": P}, {"ALL_PROXY": P}, {"HTTPS_PROXY": P},
    {"HTTP_PROXY": P, "NO_PROXY": "model.test"}, {"HTTP_PROXY": P, "NO_PROXY": "other.test,.test"},
    {"HTTP_PROXY": P, "NO_PROXY": "*"}, {"ALL_PROXY": P, "NO_PROXY": "other.test"},
    {"HTTP_PROXY": P, "no_proxy": "MODEL.test"}, {"HTTP_PROXY": P, "NO_PROXY": "model.test:8080"},
], ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items()) or "none")
def test_a_client_takes_our_connections_exactly_when_httpx_would_use_no_proxy(env, monkeypatch):
    _no_proxy_env(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    url = "http://model.test:8080/v1"

    async def main() -> tuple[bool, bool]:
        async with ModelClient(url) as ours, httpx.AsyncClient() as reference:
            direct = reference._transport_for_url(ours._url) is reference._transport
            return ours._origin_pool is not None, direct

    ours, direct = asyncio.run(main())
    assert ours == direct


@pytest.mark.parametrize(("url", "kw"), [
    ("https://model.test/v1", {}),
    ("http://user:pw@model.test/v1", {}),
    ("http://model.test/v1", {"transport": httpx.MockTransport(lambda r: httpx.Response(200))}),
], ids=["https", "credentials in the URL", "a transport given"])
def test_only_a_plain_http_client_with_nothing_for_httpx_to_do_takes_our_connections(url, kw, monkeypatch):
    _no_proxy_env(monkeypatch)
    assert ModelClient("http://model.test/v1")._origin_pool is not None
    assert ModelClient(url, **kw)._origin_pool is None


LAZY = """
import asyncio, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import harness

class Reply(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        body = sys.argv[1].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Reply)
threading.Thread(target=server.serve_forever, daemon=True).start()
seen = lambda: sorted(m for m in ("httpcore", "anyio", "h11") if m in sys.modules)
print("import", seen())

async def turn():
    async with harness.ModelClient(f"http://127.0.0.1:{server.server_port}/v1") as c:
        await c.complete(model="m", messages=[{"role": "user", "content": "x"}])

asyncio.run(turn())
print("plain http turn", seen())
harness.ModelClient("https://model.test/v1")
print("https client", seen())
"""


def test_import_and_a_plain_http_turn_load_none_of_httpx_transport(monkeypatch):
    """httpcore (and with it anyio, h11 and trio when installed) costs more to import than
    many turns take: only a client that uses httpx's transport imports it."""
    _no_proxy_env(monkeypatch)
    out = subprocess.run([sys.executable, "-c", LAZY, http_support.OK_BODY.decode()], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert out.splitlines() == ["import []", "plain http turn []",
                                "https client ['anyio', 'h11', 'httpcore']"]


@pytest.mark.parametrize("headers", [{"x-note": " padded"}, {"x-note": "a\tb "}, {"bad name": "x"}])
def test_a_header_h11_refuses_is_refused_on_our_connections_as_httpx_refuses_it(headers):
    async def main() -> list[str]:
        said = []
        async with raw_server(answering(*[http_support.OK] * 2)) as raw:
            for kw in ({}, {"transport": httpx.AsyncHTTPTransport()}):
                async with ModelClient(raw.url, max_retries=0, **kw) as c:
                    with pytest.raises(ProviderError) as raised:
                        await c.complete(model="m", messages=[{"role": "user", "content": "x"}],
                                         headers=headers)
                    said.append(str(raised.value))
            assert raw.requests == []
        return said

    ours, theirs = asyncio.run(main())
    assert ours == theirs and "LocalProtocolError: Illegal header" in ours
