"""Hostile input to the mock: hypothesis throws generated bodies, headers and content types.

Every answer must be a 2xx with a valid chat.completion (or SSE stream), or a 4xx with an
OpenAI-shaped error body — never a 500, never a dropped connection — and `/healthz` must still
answer afterwards. Bodies mix valid and invalid structure: plausible requests with random
roles, contents, tool calls and options; random JSON; random bytes; truncated, spliced and
deeply nested documents; invalid UTF-8. Faults that are 5xx or hang *by request*
(`fault=500`, `fault=hang`, `fault=malformed`) are left out: they are the mock's job.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import FULL, check_answer

from mockprovider.app import create_app
from mockprovider.reading.validation import ROLES
from mockprovider.scripts.scenarios import SCENARIOS
from mockprovider.server import serve_in_thread

pytestmark = pytest.mark.slow

EXAMPLES = 10_000 if FULL else 300
SOCKET_EXAMPLES = 1_000 if FULL else 60

# --- strategies -----------------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=24)  # lone surrogates included
SHORT = st.text(max_size=12)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SHORT, inner, max_size=4),
    max_leaves=12,
)
OPTION = st.sampled_from(
    [
        "latency=0",
        "latency=1",
        "rate=0",
        "rate=1000000",
        "retry=5",
        "fault=429",
        "fault=401",
        "fault=429@1x2",
        "fault=401@0",
        "latency=-1",
        "latency=nan",
        "latency=1e999",
        "retry=abc",
        "fault=teapot",
        "fault=500@x",
        "bogus=1",
        "x",
        "",
        "=",
        "fault=",
        "latency=0=0",
    ]
)
OPTIONS = st.lists(OPTION, max_size=3).map("+".join)
SCENARIO = st.sampled_from(list(SCENARIOS))
MODEL = SCENARIO | st.builds(lambda s, o: f"{s}+{o}", SCENARIO, OPTIONS) | ANY_TEXT | JSON_VALUE
CALL_ID = st.sampled_from(["c1", "c2", "c3"]) | ANY_TEXT
TOOL_NAME = st.sampled_from(["list_files", "read_file", "delete_file", "scan_archive"]) | ANY_TEXT
ARGUMENTS = st.sampled_from(["{}", '{"path":"errors.log"}', "{", "null", ""]) | ANY_TEXT
TOOL_CALL = (
    st.fixed_dictionaries(
        {
            "id": CALL_ID,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": TOOL_NAME, "arguments": ARGUMENTS}) | JSON_VALUE,
        },
    )
    | JSON_VALUE
)
CONTENT = (
    st.none()
    | ANY_TEXT
    | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": ANY_TEXT}) | JSON_VALUE, max_size=3)
    | JSON_VALUE
)
ROLE = st.sampled_from(ROLES) | ANY_TEXT | JSON_VALUE
MESSAGE = (
    st.fixed_dictionaries(
        {"role": ROLE},
        optional={
            "content": CONTENT,
            "tool_calls": st.lists(TOOL_CALL, max_size=3) | JSON_VALUE,
            "tool_call_id": CALL_ID | JSON_VALUE,
            "name": SHORT | JSON_VALUE,
        },
    )
    | JSON_VALUE
)
TOOL_DEF = (
    st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": TOOL_NAME, "parameters": JSON_VALUE}),
        },
    )
    | JSON_VALUE
)
REQUEST = st.fixed_dictionaries(
    {"model": MODEL, "messages": st.lists(MESSAGE, max_size=6) | JSON_VALUE},
    optional={
        "tools": st.lists(TOOL_DEF, max_size=3) | JSON_VALUE,
        "stream": st.booleans() | JSON_VALUE,
        "stream_options": st.fixed_dictionaries({}, optional={"include_usage": JSON_VALUE}) | JSON_VALUE,
        "max_tokens": st.integers(-3, 10**30) | JSON_VALUE,
        "max_completion_tokens": st.integers(-3, 50) | JSON_VALUE,
        "n": st.integers(0, 3) | JSON_VALUE,
        "temperature": JSON_VALUE,
    },
)


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed request: a scenario, and a transcript whose tool messages answer real calls."""
    messages: list[dict[str, Any]] = [
        {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(ANY_TEXT)},
        {"role": "user", "content": draw(CONTENT.filter(lambda c: c is None or isinstance(c, str)))},
    ]
    for turn in range(draw(st.integers(0, 4))):
        call_id = draw(CALL_ID.filter(lambda c: isinstance(c, str))) + str(turn)
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": draw(TOOL_NAME), "arguments": draw(ARGUMENTS)},
        }
        messages.append({"role": "assistant", "content": draw(st.none() | ANY_TEXT), "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(ANY_TEXT)})
    model = draw(SCENARIO)
    if draw(st.sampled_from([False, False, False, True])):
        model += "+" + draw(OPTIONS)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if draw(st.booleans()):
        body["stream"] = True
        body["stream_options"] = {"include_usage": draw(st.booleans())}
    if draw(st.booleans()):
        body[draw(st.sampled_from(["max_tokens", "max_completion_tokens"]))] = draw(st.integers(1, 40))
    return body


def _nested(depth: int, inner: bytes = b"1") -> bytes:
    return b"[" * depth + inner + b"]" * depth


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bytes on the wire: mostly plausible requests, then everything else."""
    kind = draw(
        st.sampled_from(
            [
                "valid",
                "valid",
                "valid",
                "request",
                "request",
                "json",
                "bytes",
                "cut",
                "splice",
                "nested",
                "nested-in-request",
                "utf8",
            ]
        )
    )
    if kind == "json":
        return json.dumps(draw(JSON_VALUE)).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "nested":
        return _nested(draw(st.integers(1, 20_000)))
    request = json.dumps(draw(conversations() if kind == "valid" else REQUEST)).encode()
    if kind == "cut":
        return request[: draw(st.integers(0, len(request)))]
    if kind == "splice":
        at = draw(st.integers(0, len(request)))
        return request[:at] + draw(st.binary(min_size=1, max_size=8)) + request[at:]
    if kind == "nested-in-request":
        depth = draw(st.integers(900, 1_100) | st.integers(1, 20_000))
        return request[:-1] + b',"extra":' + _nested(depth) + b"}"
    if kind == "utf8":
        bad = draw(
            st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"])
        )
        return request.replace(b'"', b'"' + bad, 1) if draw(st.booleans()) else bad + request
    return request


CONTENT_TYPE = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON",
        "application/json;",
        "text/plain",
        "",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json, text/plain",
    ]
) | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
HEADER_VALUE = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20)


@st.composite
def headers(draw: st.DrawFn) -> dict[str, bytes]:
    """Header values as raw bytes, so non-ASCII ones (obs-text) reach the server too."""
    h: dict[str, bytes] = {}
    # Mostly JSON, so most bodies get past the media-type check and reach validation.
    kind = draw(st.sampled_from(["json"] * 6 + ["json; charset"] + ["other"] * 2 + ["none"]))
    if kind != "none":
        h["content-type"] = {
            "json": b"application/json",
            "json; charset": b"application/json; charset=utf-8",
            "other": draw(CONTENT_TYPE).encode(),
        }[kind]
    for name, values in (
        ("x-mock-options", OPTIONS | HEADER_VALUE),
        ("x-lab-attempt", st.sampled_from(["0", "1", "2", "-1", "99999999999999999999", "²"]) | HEADER_VALUE),
        ("x-stainless-retry-count", st.integers(-5, 5).map(str) | HEADER_VALUE),
        ("authorization", HEADER_VALUE),
        ("accept", st.sampled_from(["application/json", "text/event-stream", "*/*"]) | HEADER_VALUE),
    ):
        if draw(st.sampled_from([False, False, True])):
            h[name] = draw(values).encode()
    return h


PATH = st.just("/v1/chat/completions") | OPTIONS.map(lambda o: f"/o/{o or 'latency=0'}/v1/chat/completions")

FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=not FULL,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)

# --- the tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def asgi() -> Iterator[tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]]:
    """The app in-process (no socket), driven from one event loop for speed."""
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://mock")
    try:
        yield loop, client
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def test_fuzzed_requests_in_process_get_2xx_or_openai_shaped_4xx(asgi, ledger):
    loop, client = asgi
    seen: Counter[str] = Counter()
    failures: list[str] = []

    @settings(FUZZ, max_examples=EXAMPLES)
    @given(path=PATH, body=bodies(), hdrs=headers())
    def one(path: str, body: bytes, hdrs: dict[str, bytes]) -> None:
        seen["tried"] += 1
        r = loop.run_until_complete(client.post(path, content=body, headers=hdrs))
        try:
            seen[check_answer(r.status_code, r.headers.get("content-type", ""), r.text)] += 1
        except (AssertionError, ValueError, KeyError, TypeError) as e:
            failures.append(f"{type(e).__name__}: {e}")
            raise

    try:
        one()
        health = loop.run_until_complete(client.get("/healthz"))
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
    finally:
        _record(ledger, "mock: fuzzed requests, in-process ASGI (hypothesis)", seen, failures)
    # Not a run of 415s: the fuzz must reach validation, scenarios and replies.
    assert seen["200"] + seen["200 sse"] > EXAMPLES // 100 and seen["400"] > EXAMPLES // 10, seen


def _record(ledger, fault: str, seen: Counter[str], failures: list[str]) -> None:
    ledger.record(
        fault,
        f"{seen['tried']} requests",
        tried=seen["tried"],
        survived=seen["tried"] - len(failures),
        lost=len(failures),
        detail=", ".join(f"{k}: {v}" for k, v in sorted(seen.items()) if k != "tried"),
    )


def test_fuzzed_requests_over_a_real_socket_are_answered_not_dropped(ledger):
    seen: Counter[str] = Counter()
    failures: list[str] = []
    with serve_in_thread() as url, httpx.Client(base_url=url.removesuffix("/v1"), timeout=10) as client:

        @settings(FUZZ, max_examples=SOCKET_EXAMPLES)
        @given(path=PATH, body=bodies(), hdrs=headers())
        def one(path: str, body: bytes, hdrs: dict[str, bytes]) -> None:
            seen["tried"] += 1
            try:
                # h11 (client side) refuses values with surrounding whitespace; no server would see them.
                r = client.post(path, content=body, headers={k: v.strip(b" \t") for k, v in hdrs.items()})
                seen[check_answer(r.status_code, r.headers.get("content-type", ""), r.text)] += 1
            except (httpx.TransportError, AssertionError, ValueError, KeyError, TypeError) as e:
                failures.append(f"{type(e).__name__}: {e}")
                raise

        try:
            one()
            assert client.get("/healthz").json() == {"status": "ok"}
        finally:
            _record(ledger, "mock: fuzzed requests, real loopback socket (hypothesis)", seen, failures)
