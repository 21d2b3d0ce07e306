"""The request journal: off by default, the last N requests of this process, at GET /journal."""

from __future__ import annotations

import json
import tracemalloc

import httpx
import pytest
from openai import InternalServerError, OpenAI

from mockprovider.__main__ import _parser
from mockprovider.journal import MAX_CAPACITY, Journal
from mockprovider.reading.validation import MAX_DEPTH

HELLO = [{"role": "user", "content": "hello"}]


def _root(base_url: str) -> str:
    return base_url.removesuffix("/v1")


def test_the_journal_is_off_by_default(mock_url: str):
    response = httpx.get(f"{_root(mock_url)}/journal")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "journal_off"
    assert "--journal N" in response.json()["error"]["message"]


def test_the_journal_keeps_the_last_n_requests_in_order_with_bodies_and_headers(serve_mock):
    with serve_mock(journal=2) as url:
        client = OpenAI(base_url=url, api_key="sk-user-key", max_retries=0)
        for word in ("one", "two", "three"):
            client.chat.completions.create(model="plan", messages=[{"role": "user", "content": word}])
        with pytest.raises(InternalServerError):
            client.chat.completions.create(
                model="plan+fault=500", messages=HELLO, extra_headers={"x-trace": "t1"}
            )
        journal = httpx.get(f"{_root(url)}/journal").json()
    assert journal["capacity"] == 2
    entries = journal["data"]
    assert [e["seq"] for e in entries] == [2, 3]  # 0 and 1 dropped out
    assert [e["body"]["messages"][0]["content"] for e in entries] == ["three", "hello"]
    assert entries[1]["body"]["model"] == "plan+fault=500"  # recorded even when the reply is a fault
    assert entries[1]["headers"]["x-trace"] == "t1"
    assert entries[1]["path"] == "/v1/chat/completions"
    assert entries[1]["method"] == "POST"
    assert {e["headers"]["authorization"] for e in entries} == {"<redacted>"}


def test_the_journal_needs_the_api_key_when_the_server_has_one(serve_mock):
    with serve_mock(journal=5, api_key="k") as url:
        anonymous = httpx.get(f"{_root(url)}/journal")
        keyed = httpx.get(f"{_root(url)}/journal", headers={"authorization": "Bearer k"})
    assert anonymous.status_code == 401
    assert keyed.status_code == 200


def test_in_process_entries_keep_every_header_as_sent():
    journal = Journal(3)
    journal.record(
        method="POST",
        path="/v1/chat/completions",
        headers={"authorization": "Bearer sk-1"},
        body={"model": "plan"},
    )
    (entry,) = journal.entries()
    assert entry.headers["authorization"] == "Bearer sk-1"
    assert entry.to_json()["headers"]["authorization"] == "<redacted>"


@pytest.mark.parametrize("capacity", [0, MAX_CAPACITY + 1])
def test_a_journal_is_bounded(capacity: int):
    with pytest.raises(ValueError, match=f"from 1 to {MAX_CAPACITY}"):
        Journal(capacity)


def test_the_journal_flag_is_off_by_default_and_validated(capsys, monkeypatch):
    monkeypatch.delenv("MOCK_JOURNAL", raising=False)
    assert _parser().parse_args([]).journal == 0
    assert _parser().parse_args(["--journal", "50"]).journal == 50
    with pytest.raises(SystemExit):
        _parser().parse_args(["--journal", "-3"])
    assert "expected a whole number from 0 to" in capsys.readouterr().err
    monkeypatch.setenv("MOCK_JOURNAL", "7")
    assert _parser().parse_args([]).journal == 7


def test_the_journal_serves_bodies_json_accepts_but_utf8_cannot_encode(serve_mock):
    # json.loads takes a lone surrogate escape and NaN, so the chat route answers both; the
    # journal must then serve them too, not fail with a 500 when it renders them.
    raw = b'{"model": "plan", "messages": [{"role": "user", "content": "\\ud800"}], "temperature": NaN}'
    with serve_mock(journal=5) as url:
        sent = httpx.post(
            f"{url}/chat/completions", content=raw, headers={"content-type": "application/json"}
        )
        journal = httpx.get(f"{_root(url)}/journal")
    assert sent.status_code == 200
    assert journal.status_code == 200
    (entry,) = journal.json()["data"]
    assert entry["body"]["messages"][0]["content"] == "\ud800"
    assert entry["body"]["temperature"] == "NaN"  # a string: strict JSON readers refuse a bare NaN


def test_a_journal_keeps_bodies_compact_not_as_python_objects():
    # A parsed body takes some twenty times its JSON size (a dict per "{}"), so N bodies of the
    # body limit would be far more than "N times the body limit" of memory.
    raw = json.dumps({"model": "plan", "messages": HELLO, "pad": [{}] * 20_000}).encode()
    journal = Journal(10)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(10):
            journal.record(method="POST", path="/v1/chat/completions", headers={}, body=json.loads(raw))
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 3 * 10 * len(raw), f"{kept} bytes kept for {10 * len(raw)} bytes of JSON"
    assert [entry.body for entry in journal.entries()] == [json.loads(raw)] * 10


def test_the_journal_serves_the_deepest_body_the_chat_route_accepts(serve_mock):
    # Rendering a body again, deeper in the stack, must not overflow where reading it did not.
    def body(depth: int) -> bytes:
        return b'{"model": "plan", "messages": [{"role": "user", "content": "hi"}], "x": %s}' % (
            b"[" * depth + b"]" * depth)

    with serve_mock(journal=1) as url, httpx.Client() as http:
        def accepted(depth: int) -> bool:
            sent = http.post(f"{url}/chat/completions", content=body(depth),
                             headers={"content-type": "application/json"})
            assert sent.status_code in (200, 400)
            return sent.status_code == 200

        deep = MAX_DEPTH - 1  # "x" sits at level 2 of the body: the deepest body accepted
        assert accepted(deep) and not accepted(deep + 1)
        assert accepted(deep)  # the last body journalled is the deepest accepted
        journal = http.get(f"{_root(url)}/journal")
    assert journal.status_code == 200
    assert journal.text.count("[") > deep


def test_the_journal_over_http_never_shows_a_key_sent_either_way(serve_mock):
    with serve_mock(journal=5, api_key="sk-secret-1") as url:
        sent = httpx.post(f"{url}/messages", headers={"x-api-key": "sk-secret-1"},
                          json={"model": "plan", "max_tokens": 50, "messages": HELLO})
        OpenAI(base_url=url, api_key="sk-secret-1", max_retries=0).chat.completions.create(
            model="plan", messages=HELLO)
        journal = httpx.get(f"{_root(url)}/journal", headers={"x-api-key": "sk-secret-1"})
    assert (sent.status_code, journal.status_code) == (200, 200)
    keyed, bearer = journal.json()["data"]
    assert keyed["headers"]["x-api-key"] == bearer["headers"]["authorization"] == "<redacted>"
    assert "sk-secret-1" not in journal.text
