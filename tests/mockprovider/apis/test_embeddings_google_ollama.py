"""Gemini's, Vertex AI's and Ollama's embeddings, driven by `google-genai` (Gemini API and Vertex
mode) and `ollama` unchanged: the same text gives the same vector as through OpenAI's route, each
API's own refusals in its own shape, and a scripted fault retried (google-genai) or raised (ollama)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import ollama
import pytest
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials
from hypothesis import given
from hypothesis import strategies as st

import o200k
from mockprovider.replies.embedding import vector
from mockprovider.server import serve_in_thread

TEXTS = ["worker 7 timed out after 30000 ms", "Remember to rotate your logs."]
VERTEX = "projects/p/locations/us-central1/publishers/google/models"
RETRY = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    with serve_in_thread() as url:
        yield url.removesuffix("/v1")


def _gemini(root: str, **options) -> genai.Client:
    return genai.Client(api_key="unused", http_options=types.HttpOptions(base_url=root, **options))


def _vertex(root: str, **options) -> genai.Client:
    return genai.Client(vertexai=True, project="p", location="us-central1",
                        credentials=Credentials(token="t"),
                        http_options=types.HttpOptions(base_url=root, **options))


def _values(reply: types.EmbedContentResponse) -> list[list[float]]:
    return [e.values for e in reply.embeddings]


@pytest.mark.parametrize("client", [_gemini, _vertex])
def test_google_genai_embeds_each_text_as_openais_route_does(root, client):
    with client(root) as c:
        scenario = c.models.embed_content(model="plan", contents=TEXTS)
        shortened = c.models.embed_content(model="plan", contents=TEXTS[0],
                                           config=types.EmbedContentConfig(output_dimensionality=64))
    assert _values(scenario) == [vector(t, 768) for t in TEXTS]
    assert _values(shortened) == [vector(TEXTS[0], 64)]
    with httpx.Client() as http:
        body = {"model": "plan", "input": TEXTS[0], "dimensions": 64}
        openai_route = http.post(f"{root}/v1/embeddings", json=body)
    assert openai_route.json()["data"][0]["embedding"] == _values(shortened)[0]


def test_vertex_predict_reports_each_inputs_tokens_and_whether_it_was_cut(root):
    long = "timeout " * 3000
    with _vertex(root) as c:
        reply = c.models.embed_content(model="text-embedding-005", contents=[TEXTS[0], long])
    first, second = (e.statistics for e in reply.embeddings)
    assert (first.token_count, first.truncated) == (o200k.count(TEXTS[0]), False)
    assert (second.token_count, second.truncated) == (2048, True)
    assert reply.metadata.billable_character_count == len(TEXTS[0]) + len(o200k.encoding().decode(
        o200k.encoding().encode_ordinary(long)[:2048]))


def test_vertex_sends_gemini_models_to_embed_content_and_batch_embed_contents(root):
    with _vertex(root) as c:
        one = c.models.embed_content(model="gemini-embedding-001", contents=TEXTS[0])
        both = c.models.embed_content(model="gemini-embedding-001", contents=TEXTS)
    assert _values(one) == [vector(TEXTS[0], 3072)]
    assert _values(both) == [vector(t, 3072) for t in TEXTS]
    assert one.embeddings[0].statistics.token_count == o200k.count(TEXTS[0])


def test_auto_truncate_false_refuses_a_long_input_in_googles_shape(root):
    with _vertex(root) as c, pytest.raises(errors.ClientError) as caught:
        c.models.embed_content(model="plan", contents="timeout " * 3000,
                               config=types.EmbedContentConfig(auto_truncate=False))
    assert caught.value.code == 400 and caught.value.details["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("client", [_gemini, _vertex])
def test_google_genai_retries_a_scripted_429_on_an_embedding(root, client, caplog):
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = "plan+fault=429@0x2" if client is _gemini else "plan+fault=429@0x2+retry=5"
    with client(root, retry_options=RETRY) as c:
        assert c.models.embed_content(model=model, contents=TEXTS[0]).embeddings
    statuses = [r.getMessage().rpartition(" ")[2] for r in caplog.records if f"={model} " in r.getMessage()]
    assert statuses == ["status=429", "status=429", "status=ok"]


GEMINI_BAD = [
    ("models/plan:embedContent", {}),
    ("models/plan:embedContent", {"content": {"parts": []}}),
    ("models/plan:embedContent", {"content": {"parts": [{"inlineData": {}}]}}),
    ("models/plan:embedContent", {"content": "x", "outputDimensionality": 0}),
    ("models/plan:embedContent", {"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 769}),
    ("models/plan:batchEmbedContents", {"requests": []}),
    ("models/plan:batchEmbedContents", {"requests": [{"content": {"parts": [{"text": "x"}]}}] * 101}),
    ("models/plan:batchEmbedContents", {"requests": [{"model": "models/other", "content": "x"}]}),
    ("models/plan:batchEmbedContents", {"requests": "x"}),
    (f"{VERTEX}/plan:predict", {"instances": [{"content": "x"}] * 10_000}),
    (f"{VERTEX}/plan:predict", {"instances": [{"content": 3}]}),
    (f"{VERTEX}/plan:predict", {"instances": [{"content": "x"}], "parameters": {"autoTruncate": "no"}}),
    (f"{VERTEX}/plan:predict", []),
]


@pytest.mark.parametrize("path, body", GEMINI_BAD)
def test_bad_embedding_input_gets_a_google_400(root, path, body):
    version = "v1beta1" if path.startswith("projects/") else "v1beta"
    response = httpx.post(f"{root}/{version}/{path}", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_an_unknown_embedding_model_is_googles_404(root):
    response = httpx.post(f"{root}/v1beta1/{VERTEX}/nope:predict", json={"instances": [{"content": "x"}]})
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"


def test_ollama_embeds_as_the_other_routes_do(root):
    with ollama.Client(host=root) as client:
        reply = client.embed(model="nomic-embed-text", input=TEXTS)
        assert reply.embeddings == [vector(t, 768) for t in TEXTS]
        assert reply.prompt_eval_count == sum(o200k.count(t) for t in TEXTS)
        shortened = client.embed(model="plan:latest", input=TEXTS[0], dimensions=64)
        assert shortened.embeddings == [vector(TEXTS[0], 64)]
        legacy = client.embeddings(model="mxbai-embed-large", prompt=TEXTS[0])
        assert legacy.embedding == vector(TEXTS[0], 1024)


def test_ollama_answers_an_empty_input_with_no_vector(root):
    with ollama.Client(host=root) as client:
        assert client.embed(model="plan", input=[]).embeddings == []
        assert client.embeddings(model="plan", prompt="").embedding == []


def test_ollama_cuts_a_long_input_to_the_context_unless_told_not_to(root):
    with ollama.Client(host=root) as client:
        assert client.embed(model="all-minilm", input="timeout " * 600).prompt_eval_count == 256
        with pytest.raises(ollama.ResponseError) as caught:
            client.embed(model="all-minilm", input="timeout " * 600, truncate=False)
        assert caught.value.status_code == 400 and "exceeds the context length" in caught.value.error


@pytest.mark.parametrize("body, words", [
    ({"model": "plan", "input": ["a"] * 10_000}, "at most 2048"),
    ({"model": "plan", "input": [1]}, "invalid input type"),
    ({"model": "plan", "input": {"a": 1}}, "invalid input type"),
    ({"model": "plan", "input": "a", "dimensions": 0}, "dimensions must be"),
    ({"model": "plan", "input": "a", "truncate": "yes"}, "truncate"),
    ({"input": "a"}, "model"),
])
def test_bad_ollama_input_gets_ollamas_400(root, body, words):
    response = httpx.post(f"{root}/api/embed", json=body)
    assert response.status_code == 400 and words in response.json()["error"]


def test_ollama_raises_a_scripted_fault_and_its_own_retry_is_the_next_attempt(root):
    with ollama.Client(host=root) as client:
        with pytest.raises(ollama.ResponseError) as caught:
            client.embed(model="plan+fault=429@0x1", input="again")
        assert caught.value.status_code == 429
        assert client.embed(model="plan+fault=429@0x1", input="again").embeddings


EMBED_BODIES = st.fixed_dictionaries({}, optional={
    "model": st.sampled_from(["plan", "nomic-embed-text", "nope"]) | JSON_VALUE,
    "input": st.lists(TEXT | st.integers(-2, 300_000) | JSON_VALUE, max_size=4) | TEXT | JSON_VALUE,
    "prompt": TEXT | JSON_VALUE,
    "content": st.fixed_dictionaries({"parts": st.lists(st.fixed_dictionaries({"text": TEXT | JSON_VALUE}),
                                                        max_size=3)}) | TEXT | JSON_VALUE,
    "requests": st.lists(st.fixed_dictionaries({"content": TEXT | JSON_VALUE}), max_size=3) | JSON_VALUE,
    "instances": st.lists(st.fixed_dictionaries({"content": TEXT | JSON_VALUE}), max_size=3) | JSON_VALUE,
    "parameters": st.fixed_dictionaries({}, optional={"outputDimensionality": st.integers(-2, 4000),
                                                      "autoTruncate": JSON_VALUE}) | JSON_VALUE,
    "dimensions": st.integers(-2, 4000) | JSON_VALUE,
    "outputDimensionality": st.integers(-2, 4000) | JSON_VALUE,
    "encoding_format": st.sampled_from(["float", "base64"]) | JSON_VALUE,
    "truncate": JSON_VALUE,
}) | JSON_VALUE
EMBED_PATHS = ["/v1/embeddings", "/openai/v1/embeddings", "/v1beta/models/plan:embedContent",
               "/v1beta/models/plan:batchEmbedContents", f"/v1beta1/{VERTEX}/plan:predict",
               f"/v1/{VERTEX}/gemini-embedding-001:embedContent", "/api/embed", "/api/embeddings"]


@FUZZ
@given(body=EMBED_BODIES, path=st.sampled_from(EMBED_PATHS))
def test_generated_embedding_bodies_get_vectors_or_the_apis_own_4xx_never_a_500(in_process, body, path):
    response = post_generated(in_process, path, body)
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    error = response.json().get("error")
    if response.status_code != 200:
        if path.startswith("/api/"):
            assert isinstance(error, str)
        elif ":" in path:
            assert set(error) >= {"code", "message", "status"}
        else:  # OpenAI's shape, or Azure's gateway's ({"code", "message"}) on /openai/
            assert {"message", "code"} <= set(error)
