"""Amazon Bedrock Converse: boto3's own `bedrock-runtime` client, unchanged, drives the scripts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError

import o200k
from mockprovider.apis import bedrock_eventstream
from mockprovider.apis.bedrock_request import converse_request
from mockprovider.app import create_app
from mockprovider.replies.caching import Breakpoint
from mockprovider.scripts.scenarios import ANSWER_PLAN
from mockprovider.server import serve_in_thread

QUESTION = "Which file mentions a timeout?"
SYSTEM = "You answer questions about log files."
SCHEMAS = {"list_files": {"type": "object", "properties": {}},
           "read_file": {"type": "object", "properties": {"path": {"type": "string"}}}}
TOOLS = {"tools": [{"toolSpec": {"name": n, "description": f"{n}.", "inputSchema": {"json": s}}}
                   for n, s in SCHEMAS.items()]}
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "description": f"{n}.", "parameters": s}}
              for n, s in SCHEMAS.items()]
RESULTS = {"list_files": "errors.log\naccess.log\nnotes.txt", "read_file": "worker 7 timed out"}
USER = {"role": "user", "content": [{"text": QUESTION}]}


def _root(mock_url: str) -> str:
    return mock_url.removesuffix("/v1")


def client(root: str, **config) -> boto3.client:
    """boto3's client as a user makes it, only pointed at the mock, with dummy credentials."""
    retries = config.pop("retries", {"mode": "standard", "total_max_attempts": 1})
    return boto3.client("bedrock-runtime", endpoint_url=root, region_name="us-east-1",
                        aws_access_key_id=config.pop("key", "AKIDEXAMPLE"), aws_secret_access_key="dummy",
                        config=Config(retries=retries, **config))


def streamed_reply(events) -> tuple[dict, str, dict]:
    """A converse_stream's events put back together: (the message, stopReason, metadata)."""
    blocks: dict[int, dict] = {}
    stop, metadata = None, None
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            blocks[start["contentBlockIndex"]] = {"toolUse": {**start["start"]["toolUse"], "input": ""}}
        elif "contentBlockDelta" in event:
            delta, i = event["contentBlockDelta"]["delta"], event["contentBlockDelta"]["contentBlockIndex"]
            block = blocks.setdefault(i, {"text": ""} if "text" in delta else {"toolUse": {"input": ""}})
            if "text" in delta:
                block["text"] += delta["text"]
            elif "toolUse" in delta:
                block["toolUse"]["input"] += delta["toolUse"]["input"]
        elif "messageStop" in event:
            stop = event["messageStop"]["stopReason"]
        elif "metadata" in event:
            metadata = event["metadata"]
    content = []
    for i in sorted(blocks):
        block = blocks[i]
        if "toolUse" in block:
            block["toolUse"]["input"] = json.loads(block["toolUse"]["input"])
        content.append(block)
    return {"role": "assistant", "content": content}, stop, metadata


def converse(c, stream: bool, **kwargs) -> dict:
    """One Converse call, streamed or not, as the same dict converse() returns."""
    if not stream:
        return c.converse(**kwargs)
    message, stop, metadata = streamed_reply(c.converse_stream(**kwargs)["stream"])
    return {"output": {"message": message}, "stopReason": stop, **metadata}


def drive_plan(c, stream: bool) -> tuple[list[dict], list[list[dict]]]:
    """`plan` to its answer, each toolUse answered; the replies, and the chat conversation each
    request stood for (built here, not by the mock)."""
    messages: list[dict] = [USER]
    chat: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    replies, conversations = [], []
    for _ in range(3):
        reply = converse(c, stream, modelId="plan", system=[{"text": SYSTEM}], messages=messages,
                         toolConfig=TOOLS)
        replies.append(reply)
        conversations.append(list(chat))
        message = reply["output"]["message"]
        uses = [b["toolUse"] for b in message["content"] if "toolUse" in b]
        messages.append(message)
        if not uses:
            break
        messages.append({"role": "user", "content": [
            {"toolResult": {"toolUseId": u["toolUseId"], "content": [{"text": RESULTS[u["name"]]}]}}
            for u in uses]})
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": u["toolUseId"], "type": "function",
             "function": {"name": u["name"], "arguments": json.dumps(u["input"], separators=(",", ":"))}}
            for u in uses]})
        chat += [{"role": "tool", "tool_call_id": u["toolUseId"], "content": RESULTS[u["name"]]}
                 for u in uses]
    return replies, conversations


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_boto3_drives_plan_to_the_answer_billed_by_the_chat_formula(mock_url, stream):
    replies, conversations = drive_plan(client(_root(mock_url)), stream)
    assert [r["stopReason"] for r in replies] == ["tool_use", "tool_use", "end_turn"]
    assert replies[-1]["output"]["message"]["content"] == [{"text": ANSWER_PLAN}]
    assert [r["usage"]["inputTokens"] for r in replies] == [o200k.prompt_tokens(c, CHAT_TOOLS)
                                                           for c in conversations]
    assert replies[-1]["usage"]["outputTokens"] == o200k.count(ANSWER_PLAN)
    for r in replies:
        usage = r["usage"]
        assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
        assert set(usage) == {"inputTokens", "outputTokens", "totalTokens"}  # no cachePoint, no cache fields
        assert r["metrics"]["latencyMs"] >= 0


def _raw_stream(root: str, model: str, body: dict) -> list[tuple[dict, dict]]:
    """A converse-stream reply's frames, each read by botocore's own parser (which checks both
    CRCs), as (headers, payload)."""
    response = httpx.post(f"{root}/model/{model}/converse-stream", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/vnd.amazon.eventstream"
    assert response.headers["x-amzn-requestid"]
    buffer = EventStreamBuffer()
    buffer.add_data(response.content)
    frames = [(m.headers, json.loads(m.payload)) for m in buffer]
    ours = bytearray(response.content)
    assert [(h, json.loads(p)) for h, p in bedrock_eventstream.read(ours)] == frames and not ours
    return frames


def test_every_frame_is_read_by_botocores_own_parser(mock_url):
    body = {"messages": [USER], "toolConfig": TOOLS}
    frames = _raw_stream(_root(mock_url), "plan", body)
    kinds = [h[":event-type"] for h, _ in frames]
    assert kinds == ["messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop",
                     "messageStop", "metadata"]
    assert all(h[":message-type"] == "event" and h[":content-type"] == "application/json" for h, _ in frames)
    start = {"toolUse": {"toolUseId": "c1", "name": "list_files"}}
    assert frames[1][1] == {"start": start, "contentBlockIndex": 0}
    text = _raw_stream(_root(mock_url), "plan", {"messages": [USER]})  # no tools: the script's text
    # No contentBlockStart for a text block, as Bedrock sends none.
    assert [h[":event-type"] for h, _ in text][:2] == ["messageStart", "contentBlockDelta"]


def test_a_corrupted_frame_is_refused_by_both_readers():
    frame = bedrock_eventstream.event("messageStart", {"role": "assistant"})
    bad = bedrock_eventstream.corrupted(frame)
    buffer = EventStreamBuffer()
    buffer.add_data(bad)
    with pytest.raises(ChecksumMismatch):
        list(buffer)
    with pytest.raises(bedrock_eventstream.Malformed):
        bedrock_eventstream.read(bytearray(bad))
    half = bytearray(frame[:20])
    assert bedrock_eventstream.read(half) == [] and len(half) == 20, "a partial frame waits for the rest"


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_max_tokens_cuts_the_reply_with_stop_reason_max_tokens(mock_url, stream):
    reply = converse(client(_root(mock_url)), stream, modelId="plan", messages=[USER],
                     inferenceConfig={"maxTokens": 3})
    assert reply["stopReason"] == "max_tokens"
    assert reply["usage"]["outputTokens"] == 3
    assert o200k.count(reply["output"]["message"]["content"][0]["text"]) == 3


def _attempts(root: str) -> list[str]:
    entries = httpx.get(f"{root}/journal").json()["data"]
    return [e["headers"]["amz-sdk-request"] for e in entries]


def test_boto3_retries_the_scripted_429s_then_succeeds():
    """Standard retry mode retries ThrottlingException, as against the real service."""
    with serve_in_thread(journal=10) as url:
        c = client(_root(url), retries={"mode": "standard", "total_max_attempts": 3})
        reply = c.converse(modelId="plan+fault=429@0x2", messages=[USER], toolConfig=TOOLS)
        assert reply["ResponseMetadata"]["RetryAttempts"] == 2
        assert reply["output"]["message"]["content"][0]["toolUse"]["name"] == "list_files"
        assert [re.search(r"attempt=\d+", a)[0] for a in _attempts(_root(url))] == [
            "attempt=1", "attempt=2", "attempt=3"]


def test_a_throttle_past_the_clients_retries_reaches_it_in_aws_shape(mock_url):
    c = client(_root(mock_url), retries={"mode": "standard", "total_max_attempts": 2})
    with pytest.raises(ClientError) as caught:
        c.converse_stream(modelId="plan+fault=429@0x5", messages=[USER])
    error = caught.value.response
    assert error["Error"]["Code"] == "ThrottlingException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert error["ResponseMetadata"]["RetryAttempts"] == 1
    assert error["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == "ThrottlingException"


def test_a_client_that_sends_no_attempt_has_its_repeats_counted():
    """Without boto3's `amz-sdk-request`, the same request again is the next attempt, as for Gemini."""
    with serve_in_thread() as url, httpx.Client(base_url=_root(url)) as http:
        body = {"messages": [USER]}
        statuses = [http.post("/model/plan+fault=429@0x2/converse", json=body).status_code for _ in range(4)]
    assert statuses == [429, 429, 200, 429], "answered, the same request is a new one, at attempt 0"


def test_an_overloaded_model_is_bedrocks_503_which_boto3_retries(mock_url):
    c = client(_root(mock_url), retries={"mode": "standard", "total_max_attempts": 2})
    assert c.converse(modelId="plan+fault=529@0x1", messages=[USER])["ResponseMetadata"]["RetryAttempts"] == 1
    with pytest.raises(ClientError) as caught:
        client(_root(mock_url)).converse(modelId="plan+fault=529@0", messages=[USER])
    assert caught.value.response["Error"]["Code"] == "ServiceUnavailableException"


def _read_until_it_fails(c, model: str) -> tuple[list[str], Exception]:
    """The events of a converse_stream that fails, and what boto3 raised."""
    events = c.converse_stream(modelId=model, messages=[USER])["stream"]
    seen = []
    try:
        for event in events:
            seen.append(next(iter(event)))
    except Exception as e:  # noqa: BLE001 - each case checks what it is
        return seen, e
    finally:
        events.close()
    raise AssertionError(f"{model}: the stream ended without an error after {seen}")


def test_mid_stream_faults_reach_boto3_as_bedrock_sends_them(mock_url):
    c = client(_root(mock_url))
    seen, error = _read_until_it_fails(c, "plan+fault=stream_error:2@0")
    assert isinstance(error, EventStreamError)
    assert error.response["Error"]["Code"] == "modelStreamErrorException"
    assert seen == ["messageStart", "contentBlockDelta"]
    assert isinstance(_read_until_it_fails(c, "plan+fault=malformed@0")[1], ChecksumMismatch)
    seen, error = _read_until_it_fails(c, "plan+fault=drop:2@0")  # urllib3's ProtocolError: cut short
    assert seen == ["messageStart", "contentBlockDelta"] and "ended prematurely" in str(error)


def test_errors_are_aws_shaped_with_the_request_id(mock_url):
    root = _root(mock_url)
    cases = [
        ("POST", "/model/plann/converse", {"messages": [USER]}, 400, "ValidationException"),
        ("POST", "/model/plan/converse", {"messages": []}, 400, "ValidationException"),
        ("POST", "/model/plan/converse+fault=500", {}, 404, "ResourceNotFoundException"),
        ("POST", "/model/plan+fault=500@0/converse", {"messages": [USER]}, 500, "InternalServerException"),
        ("GET", "/model/plan/converse", None, 405, "ValidationException"),
    ]
    with httpx.Client(base_url=root) as http:
        for method, path, body, status, kind in cases:
            response = http.request(method, path, json=body)
            assert (response.status_code, response.headers["x-amzn-errortype"]) == (status, kind), path
            assert set(response.json()) == {"message"} and response.json()["message"]
            assert len(response.headers["x-amzn-requestid"]) == 36
            assert "x-request-id" not in response.headers, "none of OpenAI's headers"


def test_a_model_id_may_be_an_arn_or_an_inference_profile(mock_url):
    c = client(_root(mock_url))
    for model in ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.plan",
                  "arn:aws:bedrock:eu-west-1::foundation-model/plan", "eu.plan", "global.plan+latency=0"):
        assert c.converse(modelId=model, messages=[USER], toolConfig=TOOLS)["stopReason"] == "tool_use"


def test_options_in_the_endpoint_path_apply(mock_url):
    c = client(f"{_root(mock_url)}/o/scenario=plan+fault=500@0")
    with pytest.raises(ClientError) as caught:
        c.converse(modelId="us.anthropic.claude-sonnet-4-20250514-v1:0", messages=[USER])
    assert caught.value.response["Error"]["Code"] == "InternalServerException"


@contextmanager
def _keyed() -> Iterator[str]:
    with serve_in_thread(api_key="AKIDSECRET") as url:
        yield _root(url)


def test_sigv4_is_accepted_unverified_and_a_key_is_its_access_key_id():
    with _keyed() as root:
        signed = client(root, key="AKIDSECRET").converse(modelId="plan", messages=[USER])
        assert signed["stopReason"] == "end_turn"
        with pytest.raises(ClientError) as caught:
            client(root, key="AKIDOTHER").converse(modelId="plan", messages=[USER])
        assert caught.value.response["Error"]["Code"] == "UnrecognizedClientException"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        bearer = {"authorization": "Bearer AKIDSECRET"}  # a Bedrock API key
        body = {"messages": [USER]}
        assert httpx.post(f"{root}/model/plan/converse", json=body, headers=bearer).status_code == 200


def test_a_failed_tool_result_reaches_the_script(mock_url):
    """`recover` guesses a file; the error's text says how to correct itself."""
    c = client(_root(mock_url))
    first = c.converse(modelId="recover", messages=[USER], toolConfig=TOOLS)["output"]["message"]
    use = first["content"][0]["toolUse"]
    error = {"toolResult": {"toolUseId": use["toolUseId"], "status": "error",
                            "content": [{"text": "No such file. Call list_files first."}]}}
    second = c.converse(modelId="recover", messages=[USER, first, {"role": "user", "content": [error]}],
                        toolConfig=TOOLS)
    assert second["output"]["message"]["content"][0]["toolUse"]["name"] == "list_files"


def test_count_tokens_is_the_input_a_converse_reply_of_the_same_request_states(mock_url):
    c = client(_root(mock_url))
    request = {"messages": [USER], "system": [{"text": SYSTEM}], "toolConfig": TOOLS}
    counted = c.count_tokens(modelId="plan", input={"converse": request})["inputTokens"]
    assert counted == c.converse(modelId="plan", **request)["usage"]["inputTokens"]


def test_tool_choice_naming_another_tool_refuses_the_scripted_call(mock_url):
    with pytest.raises(ClientError) as caught:
        client(_root(mock_url)).converse(modelId="plan", messages=[USER],
                                         toolConfig={**TOOLS, "toolChoice": {"tool": {"name": "read_file"}}})
    assert caught.value.response["Error"]["Code"] == "ValidationException"


def _long_run(c, stream: bool) -> list[dict]:
    """`runaway` for some turns, the system prompt and the tools marked with cachePoints."""
    system = [{"text": SYSTEM * 200}, {"cachePoint": {"type": "default"}}]
    messages, usages = [USER], []
    for _ in range(3):
        reply = converse(c, stream, modelId="runaway", system=system, messages=messages, toolConfig=TOOLS)
        usages.append(reply["usage"])
        message = reply["output"]["message"]
        messages += [message, {"role": "user", "content": [
            {"toolResult": {"toolUseId": b["toolUse"]["toolUseId"], "content": [{"text": "nothing"}]}}
            for b in message["content"] if "toolUse" in b] + [{"cachePoint": {"type": "default"}}]}]
    return usages


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_cache_points_read_and_write_the_cache_as_anthropics_breakpoints(mock_url, stream):
    usages = _long_run(client(_root(mock_url)), stream)
    first, second = usages[0], usages[1]
    assert first["cacheReadInputTokens"] == 0 and first["cacheWriteInputTokens"] > 1024
    assert second["cacheReadInputTokens"] >= first["cacheWriteInputTokens"]
    for u in usages:
        total_input = u["inputTokens"] + u["cacheReadInputTokens"] + u["cacheWriteInputTokens"]
        assert u["totalTokens"] == total_input + u["outputTokens"]


THINKER = {"name": "thinker", "turns": [{"content": "Two.", "reasoning": "One plus one is two."},
                                        {"content": "Three.", "reasoning": 40}]}


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_reasoning_is_a_reasoning_content_block_billed_as_output(stream):
    with serve_in_thread(create_app(scenario_files=[THINKER])) as url:
        c = client(_root(url))
        if stream:
            events = list(c.converse_stream(modelId="thinker", messages=[USER])["stream"])
            deltas = [e["contentBlockDelta"]["delta"] for e in events if "contentBlockDelta" in e]
            reasoning = [d["reasoningContent"] for d in deltas if "reasoningContent" in d]
            thought = "".join(r.get("text", "") for r in reasoning)
            assert thought == "One plus one is two."
            assert [d for d in deltas if "signature" in d.get("reasoningContent", {})]
            usage = events[-1]["metadata"]["usage"]
        else:
            reply = c.converse(modelId="thinker", messages=[USER])
            content = reply["output"]["message"]["content"]
            assert content[0]["reasoningContent"]["reasoningText"]["text"] == "One plus one is two."
            assert content[1] == {"text": "Two."}
            usage = reply["usage"]
            assistant = reply["output"]["message"]
            hidden = c.converse(modelId="thinker", messages=[USER, assistant, USER])["output"]["message"]
            assert isinstance(hidden["content"][0]["reasoningContent"]["redactedContent"], bytes)
    assert usage["outputTokens"] == o200k.count("One plus one is two.") + o200k.count("Two.")


def test_the_journal_finds_bedrock_requests_by_model():
    with serve_in_thread(journal=10) as url:
        root = _root(url)
        c = client(root)
        c.converse(modelId="plan+latency=0", messages=[USER])
        c.converse(modelId="arn:aws:bedrock:us-east-1::foundation-model/plan", messages=[USER])
        c.converse(modelId="once", messages=[USER])
        found = httpx.get(f"{root}/journal", params={"model": "plan"}).json()["data"]
        assert [e["path"] for e in found] == ["/model/plan+latency=0/converse",
                                              "/model/arn:aws:bedrock:us-east-1::foundation-model/plan/converse"]
        assert found[0]["headers"]["authorization"] == "<redacted>"


def test_the_control_planes_listing_names_every_scenario(mock_url):
    bedrock = boto3.client("bedrock", endpoint_url=_root(mock_url), region_name="eu-west-1",
                           aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="dummy")
    models = bedrock.list_foundation_models()["modelSummaries"]
    assert [m["modelId"] for m in models][:2] == ["plan", "runaway"]
    assert models[0]["modelArn"] == "arn:aws:bedrock:eu-west-1::foundation-model/plan"
    assert models[0]["responseStreamingSupported"] is True


WEATHER = {"name": "weather", "options": "latency=60", "turns": [
    [{"if": {"not": {"has_tool": "get_weather"}}, "content": "I cannot look the weather up."},
     {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}],
    [{"if": {"tool_result_contains": "rain", "system_contains": "brief"}, "content": "Umbrella."},
     {"content": "No umbrella needed."}],
]}


def test_a_scenario_files_conditions_and_options_hold_on_bedrock():
    weather = {"tools": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object"}}}}]}
    with serve_in_thread(create_app(scenario_files=[WEATHER])) as url:
        c = client(_root(url))
        bare = c.converse(modelId="weather", messages=[USER])
        assert bare["output"]["message"]["content"] == [{"text": "I cannot look the weather up."}]
        assert bare["metrics"]["latencyMs"] >= 60, "the file's latency option, measured"
        first = c.converse(modelId="weather", messages=[USER], toolConfig=weather)["output"]["message"]
        use = first["content"][0]["toolUse"]
        assert (use["name"], use["input"]) == ("get_weather", {"city": "Paris"})
        rain = {"role": "user", "content": [{"toolResult": {"toolUseId": use["toolUseId"],
                                                            "content": [{"json": {"sky": "rain"}}]}}]}
        answer = converse(c, True, modelId="weather+latency=0", system=[{"text": "Be brief."}],
                          messages=[USER, first, rain], toolConfig=weather)
    assert answer["output"]["message"]["content"] == [{"text": "Umbrella."}]


def test_cache_points_stand_where_anthropics_marks_would():
    """Tools, system, messages: each cachePoint caches what precedes it; in an assistant message,
    the whole message; between text blocks, the text before it."""
    point = {"cachePoint": {"type": "default"}}
    body = {"toolConfig": {"tools": [*TOOLS["tools"][:1], point]},
            "system": [{"text": "s"}, point],
            "messages": [USER, {"role": "assistant", "content": [
                {"text": "a"}, {"cachePoint": {"type": "default", "ttl": "1h"}}]},
                {"role": "user", "content": [{"text": "b"}, point, {"text": "c"}]}]}
    req = converse_request(body, model="plan", stream=False)
    assert req.cache_breakpoints == (
        Breakpoint(tools=1, messages=0, ttl="5m"), Breakpoint(tools=1, messages=1, ttl="5m"),
        Breakpoint(tools=1, messages=3, ttl="1h"), Breakpoint(tools=1, messages=4, ttl="5m", text="b"))
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "user"]
