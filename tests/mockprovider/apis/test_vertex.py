"""Gemini on Vertex AI: `google-genai` in Vertex mode (`vertexai=True`, a project and location,
OAuth credentials that need no network, the base URL pointed at the mock) reaches `plan`'s answer
unchanged, plain and streamed, and retries a scripted 429 as against the real service."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

import o200k
from mockprovider.scripts.scenarios import ANSWER_PLAN
from mockprovider.server import serve_in_thread

TOKEN = "ya29.vertex-token"
VERTEX = "projects/lab-project/locations/europe-west4/publishers/google/models"
QUESTION = "Which file mentions a timeout?"
BEARER = {"authorization": f"Bearer {TOKEN}"}


def list_files() -> str:
    """List the files in the folder."""
    return "errors.log\nnotes.txt"


def read_file(path: str) -> str:
    """Read one file.

    Args:
      path: the file's name.
    """
    return "worker 7 timed out after 30000 ms"


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    """A mock whose key is the OAuth token the client sends, with a journal."""
    with serve_in_thread(api_key=TOKEN, journal=50) as url:
        yield url.removesuffix("/v1")


def _vertex(root: str, **options) -> genai.Client:
    return genai.Client(vertexai=True, project="lab-project", location="europe-west4",
                        credentials=Credentials(token=TOKEN),
                        http_options=types.HttpOptions(base_url=root, **options))


@pytest.mark.parametrize("stream", [False, True])
def test_vertex_mode_reaches_plans_answer_plain_and_streamed(root, stream):
    config = types.GenerateContentConfig(tools=[list_files, read_file])
    with _vertex(root) as client:
        chat = client.chats.create(model="plan", config=config)
        if stream:
            text = "".join(chunk.text or "" for chunk in chat.send_message_stream(QUESTION))
        else:
            text = chat.send_message(QUESTION).text
    assert text == ANSWER_PLAN


def test_vertex_mode_posts_to_v1beta1_under_the_project_and_location_with_the_bearer_token(root):
    with _vertex(root) as client:
        client.models.generate_content(model="plan", contents="Which file mentions a timeout?")
    journal = httpx.get(f"{root}/journal", params={"model": "plan"}, headers=BEARER)
    entry = journal.json()["data"][-1]
    assert entry["path"] == f"/v1beta1/{VERTEX}/plan:generateContent"
    assert entry["headers"]["authorization"] != f"Bearer {TOKEN}"  # the journal masks it


def test_count_tokens_is_the_prompt_the_same_request_bills(root):
    with _vertex(root) as client:
        counted = client.models.count_tokens(model="plan", contents="Which file mentions a timeout?")
        billed = client.models.generate_content(model="plan", contents="Which file mentions a timeout?")
    assert counted.total_tokens == billed.usage_metadata.prompt_token_count > o200k.count("Which file")


def test_the_v1_path_of_googles_rest_samples_is_served_too(root):
    body = {"contents": [{"role": "user", "parts": [{"text": "Which file mentions a timeout?"}]}]}
    response = httpx.post(f"{root}/v1/{VERTEX}/plan:generateContent", json=body,
                          headers=BEARER)
    assert response.status_code == 200
    assert response.json()["candidates"][0]["finishReason"] == "STOP"


def test_a_scripted_429_is_retried_by_the_client_as_against_vertex(root, caplog):
    caplog.set_level(logging.INFO, logger="mockprovider")
    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
    model = "plan+fault=429@0x2"
    with _vertex(root, retry_options=retry) as client:
        reply = client.models.generate_content(model=model, contents="retry on vertex")
    assert reply.text
    statuses = [r.getMessage().rpartition(" ")[2] for r in caplog.records if f"{model} " in r.getMessage()]
    assert statuses == ["status=429", "status=429", "status=ok"]


def test_vertex_errors_are_googles_shape(root):
    with _vertex(root) as client, pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="nope", contents="x")
    assert caught.value.code == 404 and caught.value.details["error"]["status"] == "NOT_FOUND"
    wrong = genai.Client(vertexai=True, project="p", location="l", credentials=Credentials(token="wrong"),
                         http_options=types.HttpOptions(base_url=root))
    with wrong, pytest.raises(errors.ClientError) as caught:
        wrong.models.generate_content(model="plan", contents="x")
    assert caught.value.details["error"]["status"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"contents": 3}', b'{"contents": [{"parts": [{"x": 1}]}]}'])
def test_bad_input_on_vertex_gets_a_google_400_never_a_500(root, body):
    response = httpx.post(f"{root}/v1beta1/{VERTEX}/plan:generateContent", content=body,
                          headers={**BEARER, "content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("path", [
    "/v1beta1/publishers/google/models/plan",  # google-genai's models.get in Vertex mode
    "/v1beta1/publishers/google/models",  # its models.list
    f"/v1beta1/{VERTEX}/plan",
    f"/v1/{VERTEX}/plan",
])
def test_a_path_vertex_does_not_serve_is_a_404_in_googles_shape(root, path):
    response = httpx.get(f"{root}{path}", headers=BEARER)
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"
    assert "x-request-id" not in response.headers  # none of OpenAI's headers on Google's reply


def test_describing_a_model_in_vertex_mode_is_refused_in_googles_shape(root):
    with _vertex(root) as client, pytest.raises(errors.ClientError) as caught:
        client.models.get(model="plan")
    assert caught.value.code == 404 and caught.value.details["error"]["status"] == "NOT_FOUND"
