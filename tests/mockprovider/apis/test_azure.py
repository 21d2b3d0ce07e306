"""Azure OpenAI's routes, driven by the official `openai.AzureOpenAI` / `AsyncAzureOpenAI` unchanged
over a real socket: `plan` answered through a deployment, plain and streamed, a scripted 429 retried
by the client itself, and Azure's own errors for what its gateway refuses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from test_openai_client import PLAN_ANSWER, QUESTION, TOOL_RESULTS, TOOLS  # plan's question, tools and answer

from mockprovider.server import serve_in_thread

KEY = "azure-key"
VERSION = "2024-10-21"
SAFE = {name: {"filtered": False, "severity": "safe"} for name in ("hate", "self_harm", "sexual", "violence")}


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    """A keyed mock with a journal; yields its root URL (what Azure calls the endpoint)."""
    with serve_in_thread(api_key=KEY, journal=100) as url:
        yield url.removesuffix("/v1")


def _azure(root: str, **kw) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(azure_endpoint=root, api_key=KEY, api_version=VERSION, **kw)


def _post(root: str, deployment: str) -> httpx.Response:
    """One chat request to `deployment`, as a client with the right key and version sends it."""
    path, params = f"{root}/openai/deployments/{deployment}/chat/completions", {"api-version": VERSION}
    return httpx.post(path, params=params, headers={"api-key": KEY}, json={"messages": [QUESTION]})


def _feed_back(messages: list[dict], content: str | None, calls: list[tuple[str, str, str]]) -> None:
    assistant: dict = {"role": "assistant", "content": content}
    if calls:
        assistant["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                   for i, n, a in calls]
    messages.append(assistant)
    messages.extend({"role": "tool", "tool_call_id": i, "content": TOOL_RESULTS[n]} for i, n, _ in calls)


def _from_chunks(chunks: list) -> tuple[str | None, list[tuple[str, str, str]], str | None]:
    content, calls, finish = None, {}, None
    for chunk in chunks:
        for choice in chunk.choices:
            if choice.delta.content:
                content = (content or "") + choice.delta.content
            for tc in choice.delta.tool_calls or ():
                slot = calls.setdefault(tc.index, ["", "", ""])
                slot[0] = tc.id or slot[0]
                slot[1] += tc.function.name or "" if tc.function else ""
                slot[2] += tc.function.arguments or "" if tc.function else ""
            finish = choice.finish_reason or finish
    return content, [tuple(calls[i]) for i in sorted(calls)], finish


def _turn(completion) -> tuple[str | None, list[tuple[str, str, str]], str | None]:
    choice = completion.choices[0]
    calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls or ()]
    return choice.message.content, calls, choice.finish_reason


EXPECTED = [
    (None, [("c1", "list_files", "{}")], "tool_calls"),
    (None, [("c2", "read_file", '{"path":"errors.log"}')], "tool_calls"),
    (PLAN_ANSWER, [], "stop"),
]


def _drive_sync(client: openai.AzureOpenAI, model: str, stream: bool) -> list:
    messages, turns = [QUESTION], []
    for _ in range(3):
        if stream:
            kw = {"model": model, "messages": messages, "tools": TOOLS}
            with client.chat.completions.create(**kw, stream=True) as s:
                turn = _from_chunks(list(s))
        else:
            turn = _turn(client.chat.completions.create(model=model, messages=messages, tools=TOOLS))
        turns.append(turn)
        _feed_back(messages, turn[0], turn[1])
    return turns


async def _drive_async(client: openai.AsyncAzureOpenAI, model: str, stream: bool) -> list:
    messages, turns = [QUESTION], []
    for _ in range(3):
        if stream:
            s = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True)
            async with s:
                turn = _from_chunks([c async for c in s])
        else:
            turn = _turn(await client.chat.completions.create(model=model, messages=messages, tools=TOOLS))
        turns.append(turn)
        _feed_back(messages, turn[0], turn[1])
    return turns


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_azure_openai_reaches_plans_answer_through_the_plan_deployment(root, stream):
    with _azure(root, max_retries=0) as client:
        assert _drive_sync(client, "plan", stream) == EXPECTED


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_async_azure_openai_reaches_plans_answer(root, stream):
    async def main() -> list:
        async with openai.AsyncAzureOpenAI(azure_endpoint=root, api_key=KEY, api_version=VERSION,
                                           max_retries=0) as client:
            return await _drive_async(client, "plan", stream)

    assert asyncio.run(main()) == EXPECTED


def test_the_deployment_names_the_scenario_whatever_the_body_says(root):
    with _azure(root, azure_deployment="plan", max_retries=0) as client:
        assert _drive_sync(client, "gpt-4o", stream=False) == EXPECTED


def test_a_scripted_429_is_retried_by_the_client_after_retry_after_ms(root):
    model = "plan+fault=429@0x1+retry=50"
    with _azure(root, max_retries=2) as client:
        raw = client.chat.completions.with_raw_response.create(model=model, messages=[QUESTION], tools=TOOLS)
    assert _turn(raw.parse()) == EXPECTED[0]
    assert raw.retries_taken == 1
    tries = httpx.get(f"{root}/journal", params={"path": f"/openai/deployments/{model}/chat/completions"},
                      headers={"api-key": KEY}).json()["data"]
    assert [t["headers"].get("x-stainless-retry-count") for t in tries[-2:]] == ["0", "1"]


def test_a_429_has_azures_shape_and_retry_after_ms(root):
    response = _post(root, "plan+fault=429+retry=250")
    assert response.status_code == 429
    assert response.headers["retry-after-ms"] == "250"
    assert response.headers["apim-request-id"] == response.headers["x-request-id"]
    error = response.json()["error"]
    assert error["code"] == "429" and set(error) == {"code", "message"}


def test_the_client_without_retries_sees_a_rate_limit_error(root):
    with _azure(root, max_retries=0) as client, pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="plan+fault=429", messages=[QUESTION])
    assert caught.value.code == "429"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_content_filter_on_adds_azures_filter_results(root, stream):
    with _azure(root, max_retries=0, default_headers={"x-mock-options": "content_filter=on"}) as client:
        if stream:
            with client.chat.completions.create(model="plan", messages=[QUESTION], stream=True) as s:
                chunks = list(s)
            assert chunks[0].choices == []
            assert chunks[0].model_extra["prompt_filter_results"][0]["content_filter_results"] == SAFE
            assert all(c.choices[0].model_extra["content_filter_results"] == SAFE for c in chunks[1:])
            assert "".join(c.choices[0].delta.content or "" for c in chunks[1:])
        else:
            reply = client.chat.completions.create(model="plan", messages=[QUESTION])
            prompt = [{"prompt_index": 0, "content_filter_results": SAFE}]
            assert reply.model_extra["prompt_filter_results"] == prompt
            assert reply.choices[0].model_extra["content_filter_results"] == SAFE


def test_content_filter_leaves_a_malformed_faults_broken_body_as_it_is(root):
    response = _post(root, "plan+content_filter=on+fault=malformed")
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()


def test_content_filter_is_off_by_default(root):
    with _azure(root, max_retries=0) as client:
        reply = client.chat.completions.create(model="plan", messages=[QUESTION])
    assert "prompt_filter_results" not in (reply.model_extra or {})


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_azure_responses_answer_plans_first_turn(root, stream):
    with _azure(root, max_retries=0) as client:
        tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in TOOL_RESULTS]
        if stream:
            kw = {"model": "plan", "input": QUESTION["content"], "tools": tools}
            with client.responses.create(**kw, stream=True) as s:
                reply = [e for e in s if e.type == "response.completed"][0].response
        else:
            reply = client.responses.create(model="plan", input=QUESTION["content"], tools=tools)
    (call,) = reply.output
    assert (call.type, call.name, call.arguments) == ("function_call", "list_files", "{}")


def test_the_responses_deployment_route_ignores_the_bodys_model(root):
    response = httpx.post(f"{root}/openai/deployments/plan/responses", params={"api-version": VERSION},
                          headers={"api-key": KEY}, json={"model": "gpt-4o", "input": "hi"})
    assert response.status_code == 200
    assert response.json()["model"] == "plan"


def test_the_v1_routes_take_a_bearer_token_and_no_api_version(root):
    with openai.OpenAI(base_url=f"{root}/openai/v1/", api_key=KEY, max_retries=0) as client:
        reply = client.chat.completions.create(model="plan", messages=[QUESTION], tools=TOOLS)
        assert _turn(reply) == EXPECTED[0]
        assert client.responses.create(model="plan", input="hi").status == "completed"


GATEWAY = {
    "no api-version": ("/openai/deployments/plan/chat/completions", {}, 404, "404"),
    "a date that is none": ("/openai/deployments/plan/chat/completions", {"api-version": "2024-02-30"}, 400,
                            "BadRequest"),
    "not a version": ("/openai/deployments/plan/chat/completions", {"api-version": "latest"}, 400,
                      "BadRequest"),
    "before the first": ("/openai/deployments/plan/chat/completions", {"api-version": "2019-01-01"}, 400,
                         "BadRequest"),
    "unknown deployment": ("/openai/deployments/gpt-4o/chat/completions", {"api-version": VERSION}, 404,
                           "DeploymentNotFound"),
    "no deployment": ("/openai/deployments//chat/completions", {"api-version": VERSION}, 404, "404"),
    "unknown path": ("/openai/deployments/plan/completions", {"api-version": VERSION}, 404, "404"),
    "responses without a version": ("/openai/responses", {}, 404, "404"),
}


@pytest.mark.parametrize("case", GATEWAY.values(), ids=GATEWAY.keys())
def test_what_azures_gateway_refuses_gets_its_shape(root, case):
    path, params, status, code = case
    body = {"messages": [QUESTION], "input": "hi", "model": "plan"}
    response = httpx.post(f"{root}{path}", params=params, headers={"api-key": KEY}, json=body)
    assert response.status_code == status
    assert response.json() == {"error": {"code": code, "message": response.json()["error"]["message"]}}
    assert response.headers["apim-request-id"].startswith("req_")


@pytest.mark.parametrize("headers", [{}, {"api-key": "wrong"}, {"authorization": "Bearer wrong"}],
                         ids=["none", "wrong api-key", "wrong bearer"])
def test_a_missing_or_wrong_key_gets_azures_401(root, headers):
    response = httpx.post(f"{root}/openai/deployments/plan/chat/completions", params={"api-version": VERSION},
                          headers=headers, json={"messages": [QUESTION]})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "401"


def test_the_sdk_raises_its_own_errors_for_a_wrong_version_or_deployment(root):
    wrong = openai.AzureOpenAI(azure_endpoint=root, api_key=KEY, api_version="2024-13-01", max_retries=0)
    with wrong as client, pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="plan", messages=[QUESTION])
    with _azure(root, max_retries=0) as client, pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="no-such-deployment", messages=[QUESTION])
    assert caught.value.code == "DeploymentNotFound"


BAD_BODIES = {
    "empty messages": ("plan", json.dumps({"messages": []}), "messages"),
    "not an object": ("plan", "[1, 2]", None),
    "not JSON": ("plan", "{", None),
    "bad option": ("plan+content_filter=maybe", json.dumps({"messages": [QUESTION]}), "model"),
}


@pytest.mark.parametrize("case", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_what_the_model_refuses_keeps_openais_shape(root, case):
    deployment, raw, param = case
    response = httpx.post(f"{root}/openai/deployments/{deployment}/chat/completions",
                          params={"api-version": VERSION}, content=raw,
                          headers={"api-key": KEY, "content-type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    if param is not None:
        assert error["param"] == param


def test_the_listing_and_journal_still_answer_beside_azure(root):
    with _azure(root, max_retries=0) as client:
        client.chat.completions.create(model="plan", messages=[{"role": "user", "content": "journal me"}])
    listing = httpx.get(f"{root}/v1/models", headers={"authorization": f"Bearer {KEY}"}).json()
    assert "plan" in {m["id"] for m in listing["data"]}
    entries = httpx.get(f"{root}/journal", params={"path": "/openai/deployments/plan/chat/completions"},
                        headers={"api-key": KEY}).json()["data"]
    assert entries[-1]["body"]["messages"][0]["content"] == "journal me"


def test_behind_a_proxys_root_path_azure_replies_keep_their_headers():
    # A root path (uvicorn --root-path, a Mount) prefixes the scope's path: Azure's /openai routes
    # still carry the request id and the rate limits, as without one.
    body = {"messages": [QUESTION]}
    with serve_in_thread(api_key=KEY, uvicorn_options={"root_path": "/proxy"}) as url:
        root = url.removesuffix("/v1")
        ok = httpx.post(f"{root}/openai/deployments/plan/chat/completions", params={"api-version": VERSION},
                        headers={"api-key": KEY}, json=body)
        limited = httpx.post(f"{root}/openai/deployments/plan+fault=429/chat/completions",
                             params={"api-version": VERSION}, headers={"api-key": KEY}, json=body)
    assert (ok.status_code, limited.status_code) == (200, 429)
    for reply in (ok, limited):
        assert reply.headers["x-request-id"] == reply.headers["apim-request-id"]
        assert reply.headers["x-ratelimit-limit-requests"].isdigit()
    assert limited.headers["x-ratelimit-remaining-tokens"] == "0"
