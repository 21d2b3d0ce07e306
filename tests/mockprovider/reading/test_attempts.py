"""Counted attempts, per client: one client's flood of faulted requests cannot push another
client's counts out, so the other's retries still meet the faults it scripted, and no more."""

from __future__ import annotations

import httpx
import pytest
from google import genai
from google.genai import errors, types

from mockprovider.reading import attempts
from mockprovider.reading.attempts import MAX_CLIENTS, MAX_TESTS, RECENT_S, Attempts
from mockprovider.server import serve_in_thread

HI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


def test_a_repeat_counts_as_the_next_attempt_until_it_is_stale():
    seen = Attempts()
    me = ("127.0.0.1", "")
    assert [seen.count(me, b"a", t) for t in (0.0, 1.0, 2.0)] == [0, 1, 2]
    assert seen.count(me, b"b", 2.0) == 0
    assert seen.count(me, b"a", 2.0 + RECENT_S + 1) == 0, "a repeat long after is a new request"


def test_a_clients_flood_pushes_out_only_its_own_counts(monkeypatch):
    monkeypatch.setattr(attempts, "MAX_ENTRIES", 50)
    seen, flooder, other = Attempts(), ("10.0.0.1", ""), ("10.0.0.2", "")
    assert seen.count(other, b"mine", 1.0) == 0
    assert seen.count(flooder, b"first", 1.0) == 0
    for k in range(4200):
        seen.count(flooder, str(k).encode(), 1.0)
    assert seen.count(other, b"mine", 2.0) == 1, "another client's count survives"
    assert seen.count(flooder, b"first", 2.0) == 0, "the flooder's own oldest went first"


def test_tests_at_one_address_are_counted_apart_and_a_new_test_displaces_that_addresss_own():
    seen = Attempts()
    other = ("10.0.0.9", "")
    assert seen.count(other, b"mine", 1.0) == 0
    for k in range(MAX_TESTS + 5):  # one address inventing test ids
        assert seen.count(("10.0.0.1", f"t{k}"), b"same body", 1.0) == 0
    assert seen.count(other, b"mine", 2.0) == 1
    assert seen.count(("10.0.0.1", f"t{MAX_TESTS + 4}"), b"same body", 2.0) == 1
    assert seen.count(("10.0.0.1", "t0"), b"same body", 2.0) == 0, "its own oldest test was forgotten"


def test_clients_past_the_bound_forget_the_least_recently_seen():
    seen = Attempts()
    for k in range(MAX_CLIENTS + 1):
        seen.count((f"10.0.{k // 250}.{k % 250}", ""), b"x", 1.0)
    assert seen.count(("10.0.0.0", ""), b"x", 2.0) == 0  # the first client was forgotten
    assert seen.count((f"10.0.0.{MAX_CLIENTS}", ""), b"x", 2.0) == 1


def _genai(url: str, test_id: str) -> genai.Client:
    return genai.Client(api_key="unused", http_options=types.HttpOptions(
        base_url=url.removesuffix("/v1"), headers={"x-test-id": test_id},
        retry_options=types.HttpRetryOptions(attempts=1)))


def test_another_tests_flood_of_faulted_requests_leaves_my_retries_their_count(monkeypatch):
    """google-genai sends no attempt number: its retry is the same request again, counted. A
    test id of its own keeps this test's count out of reach of the other test's 4,200 requests."""
    monkeypatch.setattr(attempts, "MAX_ENTRIES", 50)  # the flood's size relative to the bound
    outcomes = []
    with serve_in_thread() as url, _genai(url, "mine") as client, httpx.Client(
            base_url=url.removesuffix("/v1"), headers={"x-test-id": "flood"}) as flood:
        for attempt in range(3):
            try:
                client.models.generate_content(model="plan+fault=429@0x2", contents="retry me")
                outcomes.append(200)
            except errors.ClientError as e:
                outcomes.append(e.code)
            if attempt == 0:
                for k in range(60):
                    body = {"contents": [{"role": "user", "parts": [{"text": f"flood {k}"}]}]}
                    sent = flood.post("/v1beta/models/plan+fault=500:generateContent", json=body)
                    assert sent.status_code == 500
    assert outcomes == [429, 429, 200]


@pytest.mark.parametrize("bad", [b"", b"a\tb", b"x" * 201, "é".encode()])
def test_a_malformed_test_id_is_a_400_naming_the_header(bad, mock_url):
    sent = httpx.post(f"{mock_url}/chat/completions", headers=[(b"x-test-id", bad)],
                      json={"model": "plan", "messages": [{"role": "user", "content": "hi"}]})
    assert sent.status_code == 400, sent.text
    assert sent.json()["error"]["param"] == "x-test-id"
