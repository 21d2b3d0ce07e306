"""OpenAI's embeddings and Azure's, driven by the official `openai` clients unchanged over a real
socket: vectors, base64, token arrays, `dimensions`, exact o200k usage, OpenAI's own refusals,
and an embedding request as turn 0 of a scenario (its faults, latency and error replies)."""

from __future__ import annotations

import base64
import json
import logging
import math
import struct
from collections.abc import Iterator

import httpx
import openai
import pytest

import o200k
from mockprovider.replies.embedding import similarity, vector
from mockprovider.server import serve_in_thread

TEXTS = ["worker 7 timed out after 30000 ms", "Remember to rotate your logs."]
VERSION = "2024-10-21"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A mock with a journal and a scenario file scripting an embedding turn."""
    scripted = [
        {"name": "embed_down", "turns": [{"error": {"status": 503, "message": "embeddings are down"}}]},
        {"name": "embed_slow", "turns": [{"content": "unused", "latency": 50}]},
        {"name": "embed_flaky", "options": "fault=429@0x2+retry=10", "turns": [{"content": "unused"}]},
    ]
    with serve_in_thread(journal=100, scenario_files=scripted) as base:
        yield base


def _client(url: str, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="unused", **kw)


def test_the_vectors_are_the_texts_own_in_the_models_length(url):
    with _client(url) as client:
        reply = client.embeddings.create(model="text-embedding-3-small", input=TEXTS, encoding_format="float")
    assert [d.index for d in reply.data] == [0, 1]
    assert [d.embedding for d in reply.data] == [vector(t, 1536) for t in TEXTS]
    assert reply.model == "text-embedding-3-small" and reply.object == "list"


def test_the_clients_default_base64_decodes_to_the_same_vectors(url):
    with _client(url) as client:
        reply = client.embeddings.create(model="text-embedding-3-large", input=TEXTS[0])
        sent = client.embeddings.with_raw_response.create(model="text-embedding-3-large", input=TEXTS[0])
    assert reply.data[0].embedding == vector(TEXTS[0], 3072)
    assert json.loads(sent.http_request.content)["encoding_format"] == "base64"
    raw = base64.b64decode(json.loads(sent.text)["data"][0]["embedding"])
    assert list(struct.unpack("<3072f", raw)) == vector(TEXTS[0], 3072)


def test_usage_is_every_inputs_exact_o200k_count(url):
    with _client(url) as client:
        reply = client.embeddings.create(model="plan", input=TEXTS)
    expected = sum(o200k.count(t) for t in TEXTS)
    assert (reply.usage.prompt_tokens, reply.usage.total_tokens) == (expected, expected)


def test_token_arrays_embed_the_text_they_stand_for_and_bill_their_length(url):
    ids = [o200k.encoding().encode_ordinary(t) for t in TEXTS]
    with _client(url) as client:
        one = client.embeddings.create(model="plan", input=ids[0], encoding_format="float")
        both = client.embeddings.create(model="plan", input=ids, encoding_format="float")
    assert one.data[0].embedding == vector(TEXTS[0], 1536)
    assert [d.embedding for d in both.data] == [vector(t, 1536) for t in TEXTS]
    assert both.usage.prompt_tokens == len(ids[0]) + len(ids[1])


def test_dimensions_gives_a_unit_vector_of_that_length(url):
    with _client(url) as client:
        reply = client.embeddings.create(model="text-embedding-3-small", input=TEXTS[0], dimensions=256)
    v = reply.data[0].embedding
    assert len(v) == 256 and math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-5)


def test_similar_texts_get_close_vectors_through_the_client(url):
    texts = [TEXTS[0], "worker 7 timed out after 3000 ms", TEXTS[1]]
    with _client(url) as client:
        a, b, c = (d.embedding for d in client.embeddings.create(model="plan", input=texts).data)
    assert similarity(a, b) > 0.8 > 0.2 > similarity(a, c)


def test_azure_openai_embeds_through_its_deployment_and_v1_routes(url):
    root = url.removesuffix("/v1")
    azure = openai.AzureOpenAI(azure_endpoint=root, api_key="unused", api_version=VERSION)
    v1 = openai.OpenAI(base_url=f"{root}/openai/v1/", api_key="unused")
    with azure, v1:
        deployed = azure.embeddings.create(model="text-embedding-3-small", input=TEXTS)
        plain = v1.embeddings.create(model="text-embedding-3-small", input=TEXTS)
    expected = [vector(t, 1536) for t in TEXTS]
    assert [d.embedding for d in deployed.data] == [d.embedding for d in plain.data] == expected
    assert deployed.usage == plain.usage


def test_azure_openai_retries_a_scripted_429_on_its_embeddings_route(url):
    root = url.removesuffix("/v1")
    deployment = "text-embedding-3-small+fault=429@0x1+retry=10"
    flaky = httpx.post(f"{root}/openai/deployments/{deployment}/embeddings", params={"api-version": VERSION},
                       json={"input": "x"}, headers={"x-stainless-retry-count": "0"})
    assert flaky.status_code == 429 and flaky.json()["error"]["code"] == "429"
    assert flaky.headers["retry-after-ms"] == "10"
    azure = openai.AzureOpenAI(azure_endpoint=root, api_key="unused", api_version=VERSION, max_retries=1)
    with azure:
        assert len(azure.embeddings.create(model=deployment, input="x").data[0].embedding) == 1536


def test_azures_embeddings_refuse_a_missing_version_in_azures_shape(url):
    root = url.removesuffix("/v1")
    response = httpx.post(f"{root}/openai/deployments/plan/embeddings", json={"input": "x"})
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "404", "message": "Resource not found"}}
    unknown = httpx.post(f"{root}/openai/deployments/nope/embeddings", params={"api-version": VERSION},
                         json={"input": "x"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "DeploymentNotFound"


def _error(url: str, body: object) -> dict:
    response = httpx.post(f"{url}/embeddings", json=body)
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


INVALID = "'$.input' is invalid."


@pytest.mark.parametrize("body, words", [
    ({"model": "plan", "input": ""}, INVALID),
    ({"model": "plan", "input": []}, INVALID),
    ({"model": "plan", "input": ["a", ""]}, INVALID),
    ({"model": "plan", "input": ["a"] * 10_000}, INVALID),
    ({"model": "plan", "input": [[]]}, INVALID),
    ({"model": "plan", "input": [1.5]}, INVALID),
    ({"model": "plan", "input": [True]}, INVALID),
    ({"model": "plan", "input": ["a", 1]}, INVALID),
    ({"model": "plan", "input": {"text": "a"}}, INVALID),
    ({"model": "plan", "input": [-1]}, "Invalid token"),
    ({"model": "plan", "input": [10**30]}, "Invalid token"),
    ({"model": "plan"}, "Missing required parameter: 'input'"),
    ({"input": "a"}, "Missing required parameter: 'model'"),
    ({"model": "plan", "input": "a", "dimensions": 0}, "Invalid value for 'dimensions' = 0"),
    ({"model": "plan", "input": "a", "dimensions": 1537}, "Must be from 1 to 1536"),
    ({"model": "text-embedding-3-large", "input": "a", "dimensions": 3073}, "Must be from 1 to 3072"),
    ({"model": "plan", "input": "a", "dimensions": "8"}, "expected an integer"),
    ({"model": "text-embedding-ada-002", "input": "a", "dimensions": 8}, "does not support specifying"),
    ({"model": "plan", "input": "a", "encoding_format": "int8"}, "is not one of ['float', 'base64']"),
    ({"model": "plan", "input": "timeout " * 8200}, f"you requested {o200k.count('timeout ' * 8200)} "),
    ({"model": "plan", "input": [" a" * 8000] * 40}, "Requested 320000 tokens, max 300000 tokens"),
    ([], "expected a JSON object"),
])
def test_bad_input_gets_openais_own_refusal(url, body, words):
    assert words in _error(url, body)["message"]


def test_a_5_mb_string_is_refused_and_the_server_stays_responsive(url, serve_mock):
    huge = "timeout " * 655_360
    assert _error(url, {"model": "plan", "input": huge})["code"] == "request_too_large"
    with serve_mock(max_body_bytes=8_000_000) as big:
        error = _error(big, {"model": "plan", "input": huge})
        assert f"is 8192 tokens, however you requested {o200k.count(huge)} tokens" in error["message"]
        assert httpx.get(big.removesuffix("/v1") + "/healthz").json() == {"status": "ok"}


def test_an_unknown_model_is_a_404_naming_the_scenarios(url):
    response = httpx.post(f"{url}/embeddings", json={"model": "nope", "input": "a"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


def test_a_scripted_429_is_retried_by_the_client_as_against_the_real_service(url, caplog):
    caplog.set_level(logging.INFO, logger="mockprovider")
    with _client(url, max_retries=2) as client:
        reply = client.embeddings.create(model="text-embedding-3-small+fault=429@0x2+retry=10", input="x")
    assert len(reply.data[0].embedding) == 1536
    statuses = [r.getMessage().rpartition(" ")[2] for r in caplog.records if "turn=0" in r.getMessage()]
    assert statuses[-3:] == ["status=429", "status=429", "status=ok"]


def test_a_scenario_files_options_and_error_reply_apply_to_an_embedding_turn(url):
    with _client(url, max_retries=2) as client:
        assert client.embeddings.create(model="embed_flaky", input="x").data
    with _client(url, max_retries=0) as client, pytest.raises(openai.InternalServerError) as caught:
        client.embeddings.create(model="embed_down", input="x")
    assert caught.value.status_code == 503 and "embeddings are down" in caught.value.message
    with _client(url, max_retries=0) as client, pytest.raises(openai.InternalServerError):
        client.embeddings.create(model="text-embedding-3-small+fault=500", input="x")


def test_latency_delays_an_embedding_reply(url, caplog):
    with _client(url) as client:
        sent = client.embeddings.with_raw_response.create(model="embed_slow+latency=20", input="x")
    assert sent.elapsed.total_seconds() >= 0.07


def test_a_malformed_fault_sends_a_broken_body(url):
    response = httpx.post(f"{url}/embeddings", json={"model": "plan+fault=malformed", "input": "x"})
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_the_journal_shows_embedding_requests(url):
    with _client(url) as client:
        client.embeddings.create(model="text-embedding-3-small", input="journal me")
    journal = url.removesuffix("/v1") + "/journal"
    entries = httpx.get(journal, params={"path": "/v1/embeddings"}).json()["data"]
    assert entries[-1]["body"]["input"] == "journal me"
    named = httpx.get(journal, params={"model": "text-embedding-3-small"}).json()
    assert named["data"][-1]["body"]["input"] == "journal me"


def test_the_model_listing_names_the_embedding_models(url):
    with _client(url) as client:
        names = {m.id for m in client.models.list()}
    assert {"plan", "text-embedding-3-small", "text-embedding-3-large", "nomic-embed-text"} <= names


def test_a_large_embedding_body_is_written_a_vector_at_a_time(url, monkeypatch):
    # One json.dumps call holds the GIL throughout: 2,048 vectors of 3,072 numbers written in one
    # call held the event loop (and /healthz) for about a second from the worker thread.
    from mockprovider.apis import shared

    longest = [0]
    dumps = shared._dumps

    def measured(data):
        text = dumps(data)
        longest[0] = max(longest[0], len(text))
        return text

    monkeypatch.setattr(shared, "_dumps", measured)
    texts = [f"text {i}" for i in range(300)]
    with openai.OpenAI(base_url=url, api_key="k", max_retries=0) as client:
        reply = client.embeddings.create(model="text-embedding-3-large", input=texts, encoding_format="float")
    assert [d.embedding for d in reply.data[:2]] == [vector("text 0", 3072), vector("text 1", 3072)]
    assert reply.usage.prompt_tokens == sum(o200k.count(t) for t in texts)
    assert longest[0] < 3072 * 25  # a piece is one vector at most, never the whole body
