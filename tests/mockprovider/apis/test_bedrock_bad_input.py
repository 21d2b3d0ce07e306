"""Bad Converse input gets Bedrock's own 400 (`ValidationException`), never a 500, and the server
keeps serving; generated bodies, hostile or plausible, get a reply or an AWS-shaped 4xx."""

from __future__ import annotations

import json
from urllib.parse import quote

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated
from hypothesis import given
from hypothesis import strategies as st

from mockprovider.apis import bedrock_eventstream
from mockprovider.server import serve_in_thread

USER = {"role": "user", "content": [{"text": "hi"}]}
USE = {"toolUse": {"toolUseId": "c1", "name": "list_files", "input": {}}}
ASKED = {"role": "assistant", "content": [USE]}
TOOLS = {"tools": [{"toolSpec": {"name": "list_files", "inputSchema": {"json": {"type": "object"}}}}]}


def ok(**fields) -> dict:
    return {"messages": [USER], **fields}


def answered(result: dict) -> list[dict]:
    return [USER, ASKED, {"role": "user", "content": [{"toolResult": result}]}]


BAD = {
    "malformed_json": b'{"messages": [',
    "body_is_array": [ok()],
    "missing_messages": {},
    "empty_messages": ok(messages=[]),
    "messages_not_array": ok(messages="hi"),
    "message_not_object": ok(messages=["hi"]),
    "bad_role": ok(messages=[{"role": "system", "content": [{"text": "hi"}]}]),
    "starts_with_assistant": ok(messages=[{"role": "assistant", "content": [{"text": "hi"}]}]),
    "two_user_messages_in_a_row": ok(messages=[USER, USER]),
    "empty_content": ok(messages=[{"role": "user", "content": []}]),
    "content_is_string": ok(messages=[{"role": "user", "content": "hi"}]),
    "block_with_two_members": ok(messages=[{"role": "user", "content": [{"text": "a", "image": {}}]}]),
    "image_block": ok(messages=[{"role": "user", "content": [{"image": {"format": "png"}}]}]),
    "text_not_string": ok(messages=[{"role": "user", "content": [{"text": 5}]}]),
    "tool_use_in_user_message": ok(messages=[{"role": "user", "content": [USE]}]),
    "tool_use_input_not_object": ok(messages=[USER, {"role": "assistant", "content": [
        {"toolUse": {**USE["toolUse"], "input": [1]}}]}]),
    "tool_result_for_an_unknown_tool_use_id": ok(messages=answered(
        {"toolUseId": "zz", "content": [{"text": "x"}]})),
    "tool_result_answering_nothing": ok(messages=[{"role": "user", "content": [
        {"toolResult": {"toolUseId": "c1", "content": [{"text": "x"}]}}]}]),
    "tool_use_left_unanswered": ok(messages=[USER, ASKED, USER]),
    "tool_result_twice": ok(messages=[USER, ASKED, {"role": "user", "content": [
        {"toolResult": {"toolUseId": "c1", "content": [{"text": "x"}]}}] * 2}]),
    "tool_result_bad_status": ok(messages=answered({"toolUseId": "c1", "status": "maybe", "content": []})),
    "tool_result_content_image": ok(messages=answered({"toolUseId": "c1", "content": [{"image": {}}]})),
    "system_not_array": ok(system="be brief"),
    "system_block_not_text": ok(system=[{"image": {}}]),
    "max_tokens_zero": ok(inferenceConfig={"maxTokens": 0}),
    "max_tokens_string": ok(inferenceConfig={"maxTokens": "100"}),
    "temperature_out_of_range": ok(inferenceConfig={"temperature": 7}),
    "tool_config_without_tools": ok(toolConfig={}),
    "tool_spec_without_schema": ok(toolConfig={"tools": [{"toolSpec": {"name": "list_files"}}]}),
    "tool_choice_unknown": ok(toolConfig={**TOOLS, "toolChoice": {"some": {}}}),
    "tool_choice_names_an_undeclared_tool": ok(toolConfig={**TOOLS, "toolChoice": {"tool": {"name": "rm"}}}),
    "cache_point_bad_type": ok(system=[{"text": "x"}, {"cachePoint": {"type": "forever"}}]),
    "five_cache_points": ok(system=[{"text": "x"}, *[{"cachePoint": {"type": "default"}}] * 5]),
    "bad_options": ok(),
    "unknown_model": ok(),
}
MODELS = {"bad_options": "plan+fault=nope", "unknown_model": "plann"}


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
def test_bad_input_gets_a_validation_exception_never_a_500(mock_url, body):
    name = next(k for k, v in BAD.items() if v is body)
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(base_url=mock_url.removesuffix("/v1")) as http:
        for route in ("converse", "converse-stream"):
            response = http.post(f"/model/{MODELS.get(name, 'plan')}/{route}", content=content,
                                 headers={"content-type": "application/json"})
            assert response.status_code == 400, (route, response.text)
            assert response.headers["x-amzn-errortype"] == "ValidationException"
            assert set(response.json()) == {"message"} and response.json()["message"]
        assert http.get("/healthz").status_code == 200, "the server keeps serving"


def test_boto3_raises_the_unknown_tool_use_id_as_bedrocks_validation_exception(mock_url):
    c = boto3.client("bedrock-runtime", endpoint_url=mock_url.removesuffix("/v1"), region_name="us-east-1",
                     aws_access_key_id="x", aws_secret_access_key="y",
                     config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
    with pytest.raises(ClientError) as caught:
        c.converse(modelId="plan", messages=BAD["tool_result_for_an_unknown_tool_use_id"]["messages"],
                   toolConfig=TOOLS)
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert "toolUseId zz" in error["Message"] and "messages.2.content" in error["Message"]


def test_transport_level_errors_are_aws_shaped_too(serve_mock):
    limit = 10_000
    with serve_mock(max_body_bytes=limit, api_key="secret") as url, \
            httpx.Client(base_url=url.removesuffix("/v1")) as http:
        key = {"authorization": "Bearer secret"}
        cases = [
            ({"json": ok()}, 403, "UnrecognizedClientException"),
            ({"json": ok(), "headers": {"authorization": "AWS4-HMAC-SHA256 Credential=other/x, Signature=y"}},
             403, "UnrecognizedClientException"),
            ({"content": b"{}", "headers": key}, 415, "ValidationException"),
            ({"json": ok(padding="x" * limit), "headers": key}, 413, "ValidationException"),
            # An event-stream frame where a JSON body belongs, and one that is not even a frame.
            ({"content": bedrock_eventstream.event("messageStart", {"role": "user"}),
              "headers": {**key, "content-type": "application/vnd.amazon.eventstream"}},
             415, "ValidationException"),
            ({"content": b"\x00\x00\x00\x10garbage", "headers": {**key, "content-type": "application/json"}},
             400, "ValidationException"),
        ]
        for kwargs, status, kind in cases:
            response = http.post("/model/plan/converse-stream", **kwargs)
            assert (response.status_code, response.headers["x-amzn-errortype"]) == (status, kind)
            assert set(response.json()) == {"message"}
        assert http.post("/model/plan/converse", json=ok(), headers=key).status_code == 200


# --- hostile input: generated bodies, never a 500 ------------------------------------------------

BLOCK = (
    st.fixed_dictionaries({"text": TEXT | JSON_VALUE})
    | st.fixed_dictionaries({"toolUse": st.fixed_dictionaries(
        {"toolUseId": st.just("c1") | TEXT, "name": TEXT | JSON_VALUE,
         "input": st.dictionaries(TEXT, JSON_VALUE) | JSON_VALUE})})
    | st.fixed_dictionaries({"toolResult": st.fixed_dictionaries(
        {"toolUseId": st.just("c1") | TEXT},
        optional={"content": st.lists(st.fixed_dictionaries({"text": TEXT}) | JSON_VALUE, max_size=2)
                  | JSON_VALUE,
                  "status": st.sampled_from(["success", "error"]) | JSON_VALUE})})
    | st.fixed_dictionaries({"cachePoint": st.just({"type": "default"}) | JSON_VALUE})
    | st.fixed_dictionaries({"reasoningContent": JSON_VALUE})
    | JSON_VALUE
)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]) | JSON_VALUE,
                                 "content": st.lists(BLOCK, max_size=3) | JSON_VALUE})
PLAUSIBLE = st.fixed_dictionaries(
    {"messages": st.lists(st.fixed_dictionaries({"role": st.just("user"),
                                                 "content": st.lists(st.fixed_dictionaries({"text": TEXT}),
                                                                     min_size=1, max_size=2)}),
                          min_size=1, max_size=1)},
    optional={"system": st.lists(st.fixed_dictionaries({"text": TEXT}), max_size=2),
              "inferenceConfig": st.fixed_dictionaries({}, optional={"maxTokens": st.integers(1, 40)}),
              "toolConfig": st.fixed_dictionaries({"tools": st.lists(st.fixed_dictionaries(
                  {"toolSpec": st.fixed_dictionaries({"name": TEXT, "inputSchema": st.just({"json": {}})})}),
                  min_size=1, max_size=2)})},
)
WILD = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, max_size=4) | JSON_VALUE},
    optional={
        "system": st.lists(BLOCK, max_size=2) | JSON_VALUE,
        "inferenceConfig": st.dictionaries(st.sampled_from(["maxTokens", "temperature", "topP"]), JSON_VALUE)
        | JSON_VALUE,
        "toolConfig": st.dictionaries(st.sampled_from(["tools", "toolChoice"]), JSON_VALUE) | JSON_VALUE,
    },
)


@FUZZ
@given(body=PLAUSIBLE | WILD, route=st.sampled_from(["converse", "converse-stream"]),
       model=st.sampled_from(["plan", "us.plan", "arn:aws:bedrock:us-east-1::foundation-model/plan"]) | TEXT)
def test_generated_bodies_get_a_reply_or_an_aws_error_never_a_500(in_process, body, route, model):
    encoded = quote(model.encode("utf-8", "surrogatepass"), safe="")  # as boto3 sends a model id
    response = post_generated(in_process, f"/model/{encoded}/{route}", body)
    if response.status_code == 200 and route == "converse":
        assert response.json()["stopReason"] in ("end_turn", "tool_use", "max_tokens")
    elif response.status_code == 200:
        assert response.headers["content-type"] == "application/vnd.amazon.eventstream"
    else:
        assert 400 <= response.status_code < 500, response.text
        assert response.headers["x-amzn-errortype"].endswith("Exception")
        assert set(response.json()) == {"message"}


def test_a_bug_in_the_mock_is_still_answered_in_aws_shape(monkeypatch, caplog):
    from starlette.testclient import TestClient

    from mockprovider.apis import bedrock
    from mockprovider.app import create_app

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(bedrock, "converse_request", broken)
    for root_path in ("", "/proxy"):  # behind a proxy's prefix too
        with TestClient(create_app(), raise_server_exceptions=False, root_path=root_path) as client:
            response = client.post(f"{root_path}/model/arn:aws:bedrock:x::foundation-model/api/plan/converse",
                                   json=ok())
        assert response.status_code == 500
        assert response.headers["x-amzn-errortype"] == "InternalServerException"
        assert response.json() == {"message": "Internal error in the mock: RuntimeError"}
        assert "x-request-id" not in response.headers


def test_a_model_id_no_route_matches_is_answered_in_aws_shape(in_process):
    for path in ("/model/%0A/converse", "/model/plan%0Aplan/converse-stream", "/model/%0A/invoke"):
        response = in_process.post(path, json=ok())
        assert response.status_code == 404
        assert response.headers["x-amzn-errortype"] == "ResourceNotFoundException"
        assert set(response.json()) == {"message"}


@pytest.mark.parametrize("prefix", ["", "/o/latency=0"])
def test_a_model_id_holding_another_apis_path_still_gets_only_aws_headers(mock_url, prefix):
    # '/v1/' in the model id once drew OpenAI's headers (and a retry-after AWS never sends) onto
    # a ThrottlingException; '/messages' at the end drew Anthropic's onto a 404.
    arn = quote("arn:aws:bedrock:us-east-1:123456789012:custom-model/v1/plan+fault=429", safe="")
    root = mock_url.removesuffix("/v1") + prefix
    throttled = httpx.post(f"{root}/model/{arn}/converse", json=ok())
    unknown = httpx.post(f"{root}/model/{quote('x/v1/plan', safe='')}/messages", json=ok())
    assert (throttled.status_code, throttled.headers["x-amzn-errortype"]) == (429, "ThrottlingException")
    assert (unknown.status_code, unknown.headers["x-amzn-errortype"]) == (404, "ResourceNotFoundException")
    for response in (throttled, unknown):
        names = set(response.headers)
        assert not names & {"retry-after", "x-request-id", "request-id", "x-ratelimit-remaining-tokens",
                            "anthropic-ratelimit-tokens-remaining"}, names


def test_behind_a_proxys_root_path_a_bedrock_reply_still_gets_only_aws_headers():
    arn = quote("arn:aws:bedrock:us-east-1:123456789012:custom-model/v1/plan+fault=429", safe="")
    with serve_in_thread(uvicorn_options={"root_path": "/proxy"}) as url:
        throttled = httpx.post(f"{url.removesuffix('/v1')}/model/{arn}/converse", json=ok())
    assert (throttled.status_code, throttled.headers["x-amzn-errortype"]) == (429, "ThrottlingException")
    assert not set(throttled.headers) & {"retry-after", "x-request-id", "x-ratelimit-remaining-tokens"}
