"""Titan text embeddings through Bedrock's invoke, with boto3's `invoke_model` unchanged: the
shared vector (the same text gives the same numbers as on OpenAI's route), o200k_base counts,
faults as turn 0 of a scenario, and every bad body a ValidationException, never a 500."""

from __future__ import annotations

import json
import math

import boto3
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated
from hypothesis import given
from hypothesis import strategies as st

import o200k
from mockprovider.app import create_app
from mockprovider.replies import embedding
from mockprovider.server import serve_in_thread

TEXT_ONE = "worker 7 timed out after 30000 ms"
V2 = "amazon.titan-embed-text-v2:0"


def _client(mock_url: str, attempts: int = 1):
    return boto3.client("bedrock-runtime", endpoint_url=mock_url.removesuffix("/v1"), region_name="us-east-1",
                        aws_access_key_id="unused", aws_secret_access_key="unused",
                        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}))


def _invoke(client, model: str, body: dict) -> tuple[dict, dict]:
    reply = client.invoke_model(modelId=model, body=json.dumps(body))
    return json.loads(reply["body"].read()), reply["ResponseMetadata"]["HTTPHeaders"]


def test_titan_v2_embeds_with_the_shared_vector_and_counts_o200k_tokens(mock_url):
    out, headers = _invoke(_client(mock_url), V2, {"inputText": TEXT_ONE})
    assert out["embedding"] == embedding.vector(TEXT_ONE, 1024)
    assert math.isclose(math.fsum(x * x for x in out["embedding"]), 1.0, rel_tol=1e-6)
    counted = int(headers["x-amzn-bedrock-input-token-count"])
    assert out["inputTextTokenCount"] == o200k.count(TEXT_ONE) == counted
    assert out["embeddingsByType"] == {"float": out["embedding"]}
    with openai.OpenAI(base_url=mock_url, api_key="unused") as oai:
        same = oai.embeddings.create(model="text-embedding-3-large", input=TEXT_ONE, dimensions=1024)
    assert same.data[0].embedding == out["embedding"], "the same text, the same vector, in every format"


def test_dimensions_and_binary_embeddings_and_titan_v1(mock_url):
    c = _client(mock_url)
    out, _ = _invoke(c, V2, {"inputText": TEXT_ONE, "dimensions": 256, "normalize": True,
                             "embeddingTypes": ["binary", "float"]})
    assert len(out["embedding"]) == 256
    assert out["embeddingsByType"]["binary"] == [1 if x > 0 else 0 for x in out["embedding"]]
    near, _ = _invoke(c, V2, {"inputText": "worker 7 timed out", "dimensions": 256})
    far, _ = _invoke(c, V2, {"inputText": "Remember to rotate your logs.", "dimensions": 256})
    assert embedding.similarity(out["embedding"], near["embedding"]) > embedding.similarity(
        out["embedding"], far["embedding"])
    v1, _ = _invoke(c, "amazon.titan-embed-text-v1", {"inputText": TEXT_ONE})
    assert len(v1["embedding"]) == 1536 and set(v1) == {"embedding", "inputTextTokenCount"}


def test_a_scripted_429_is_retried_by_boto3_and_a_scenarios_error_reply_is_sent(mock_url):
    out, _ = _invoke(_client(mock_url, attempts=3), f"{V2}+fault=429@0x2", {"inputText": TEXT_ONE})
    assert out["embedding"] == embedding.vector(TEXT_ONE, 1024)
    failing = {"name": "failing", "turns": [{"error": {"status": 503, "message": "down for a moment"}}]}
    with serve_in_thread(create_app(scenario_files=[failing])) as url, pytest.raises(ClientError) as caught:
        _invoke(_client(url), "failing", {"inputText": TEXT_ONE})
    error = caught.value.response["Error"]
    assert error == {"Code": "ServiceUnavailableException", "Message": "down for a moment"}


BAD = {
    "missing_input_text": {"dimensions": 256},
    "empty_input_text": {"inputText": ""},
    "input_text_not_string": {"inputText": 5},
    "dimensions_not_allowed": {"inputText": "x", "dimensions": 100},
    "extraneous_key": {"inputText": "x", "input": "x"},
    "normalize_not_boolean": {"inputText": "x", "normalize": "yes"},
    "embedding_types_unknown": {"inputText": "x", "embeddingTypes": ["int8"]},
    "too_many_tokens": {"inputText": "timeout " * 9000},
    "body_is_array": [{"inputText": "x"}],
}


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
def test_bad_bodies_are_validation_exceptions_never_a_500(mock_url, body):
    with httpx.Client(base_url=mock_url.removesuffix("/v1")) as http:
        response = http.post(f"/model/{V2}/invoke", json=body)
        assert (response.status_code, response.headers["x-amzn-errortype"]) == (400, "ValidationException")
        assert set(response.json()) == {"message"}
        assert http.get("/healthz").status_code == 200


def test_other_models_content_types_and_a_5_mb_text_are_refused_in_aws_shape(mock_url):
    root = mock_url.removesuffix("/v1")
    cases = [
        ("/model/text-embedding-3-small/invoke", {"json": {"inputText": "x"}}, 400),
        ("/model/anthropic.claude-3-haiku/invoke", {"json": {"inputText": "x"}}, 400),
        (f"/model/{V2}/invoke", {"content": b"x", "headers": {"content-type": "text/plain"}}, 400),
        (f"/model/{V2}/invoke", {"json": {"inputText": "x" * 5_000_000}}, 413),
    ]
    with httpx.Client(base_url=root) as http:
        for path, kwargs, status in cases:
            response = http.post(path, **kwargs)
            assert response.status_code == status
            assert response.headers["x-amzn-errortype"] == "ValidationException"
        assert http.post(f"/model/{V2}/invoke", json={"inputText": "x"}).status_code == 200


@FUZZ
@given(body=st.fixed_dictionaries({}, optional={
    "inputText": TEXT | JSON_VALUE, "dimensions": st.sampled_from([256, 512, 1024]) | JSON_VALUE,
    "normalize": st.booleans() | JSON_VALUE, "embeddingTypes": st.lists(st.sampled_from(["float", "binary"]))
    | JSON_VALUE}) | JSON_VALUE, model=st.sampled_from([V2, "amazon.titan-embed-text-v1", "plan"]))
def test_generated_bodies_get_an_embedding_or_an_aws_error_never_a_500(in_process, body, model):
    response = post_generated(in_process, f"/model/{model}/invoke", body)
    if response.status_code == 200:
        assert math.isclose(math.fsum(x * x for x in response.json()["embedding"]), 1.0, rel_tol=1e-6)
    else:
        assert 400 <= response.status_code < 500
        assert response.headers["x-amzn-errortype"] == "ValidationException"
