"""/v1/models lists every scenario with its description and documents the options syntax."""

from __future__ import annotations

import httpx
import openai

from mockprovider.replies.embedding import KNOWN
from mockprovider.scripts import scenarios
from mockprovider.scripts.scenarios import SCENARIOS

LISTED = [*SCENARIOS, *KNOWN]
"""Every scenario, then the embedding models."""


def test_models_lists_every_scenario_with_a_description(mock_url):
    with httpx.Client(base_url=mock_url) as client:
        body = client.get("/models").json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == LISTED
    for model in body["data"]:
        assert model["object"] == "model"
        assert model["owned_by"] and isinstance(model["created"], int)
        if model["id"] in SCENARIOS:
            assert model["description"] == scenarios.describe(SCENARIOS[model["id"]]) != ""
        else:
            assert f"vectors of {KNOWN[model['id']].dimensions} numbers" in model["description"]


def test_models_documents_the_options_syntax(mock_url):
    with httpx.Client(base_url=mock_url) as client:
        syntax = client.get("/models").json()["options"]
    for piece in (
        "latency=",
        "rate=",
        "retry=",
        "fault=",
        "/o/",
        "x-mock-options",
        "x-stainless-retry-count",
        "x-lab-attempt",
        "429",
        "500",
        "401",
        "hang",
        "malformed",
    ):
        assert piece in syntax


def test_official_client_lists_models(mock_url):
    with openai.OpenAI(base_url=mock_url, api_key="unused", max_retries=0) as client:
        assert [m.id for m in client.models.list()] == LISTED


def test_models_answer_under_an_options_prefix(mock_url):
    prefixed = mock_url.removesuffix("/v1") + "/o/latency=1/v1"
    with httpx.Client(base_url=prefixed) as client:
        assert [m["id"] for m in client.get("/models").json()["data"]] == LISTED


def test_healthz(mock_url):
    with httpx.Client() as client:
        assert client.get(mock_url.removesuffix("/v1") + "/healthz").json() == {"status": "ok"}
