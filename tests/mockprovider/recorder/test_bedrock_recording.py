"""Bedrock's Converse sessions through the recording proxy: boto3's calls, whole and streamed, are
recorded (the upstream is another mock on loopback) and replayed in any format, and a recording
made in another format replays through boto3; half a stream is never recorded."""

from __future__ import annotations

import json

import boto3
import httpx
import openai
import pytest
from botocore.config import Config

from mockprovider.apis import bedrock_eventstream
from mockprovider.app import create_app
from mockprovider.recorder import record
from mockprovider.recorder.bedrock import ConverseStream, converse_reply
from mockprovider.recorder.replies import NotRecordable
from mockprovider.server import serve_in_thread

QUESTION = "Which file mentions a timeout?"
TOOLS = {"tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}
                   for n in ("list_files", "read_file")]}
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
              for n in ("list_files", "read_file")]


def _client(root: str):
    return boto3.client("bedrock-runtime", endpoint_url=root, region_name="us-east-1",
                        aws_access_key_id="unused", aws_secret_access_key="unused",
                        config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


def _user(text: str) -> dict:
    return {"role": "user", "content": [{"text": text}]}


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_a_boto3_session_is_recorded_and_replays_in_another_format(tmp_path, stream):
    out = tmp_path / "bedrock.json"
    with serve_in_thread() as upstream, record(upstream, out, name="recorded") as proxy:
        c = _client(proxy.root_url)
        kwargs = {"modelId": "us.plan", "messages": [_user(QUESTION)], "toolConfig": TOOLS}
        if stream:
            events = list(c.converse_stream(**kwargs)["stream"])
            assert [next(iter(e)) for e in events][0] == "messageStart", "the stream is relayed as it came"
        else:
            assert c.converse(**kwargs)["stopReason"] == "tool_use"
    ((turn, *_),) = json.loads(out.read_text())["turns"]
    assert turn["tool_calls"][0]["name"] == "list_files"
    with record("http://127.0.0.1:9/v1", out, strict=True) as replay:
        chat = openai.OpenAI(base_url=replay.base_url, api_key="unused", max_retries=0)
        reply = chat.chat.completions.create(model="plan", tools=CHAT_TOOLS,
                                             messages=[{"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.tool_calls[0].function.name == "list_files"


def test_a_recording_made_with_another_client_replays_through_boto3(tmp_path):
    out = tmp_path / "chat.json"
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        chat = openai.OpenAI(base_url=proxy.base_url, api_key="unused", max_retries=0)
        chat.chat.completions.create(model="plan", tools=CHAT_TOOLS,
                                     messages=[{"role": "user", "content": QUESTION}])
    with record("http://127.0.0.1:9/v1", out, strict=True) as replay:
        c = _client(replay.root_url)
        whole = c.converse(modelId="plan", messages=[_user(QUESTION)], toolConfig=TOOLS)
        streamed = c.converse_stream(modelId="plan", messages=[_user(QUESTION)], toolConfig=TOOLS)
        events = list(streamed["stream"])
        missed = httpx.post(f"{replay.root_url}/model/plan/converse",
                            json={"messages": [_user("Never asked")]})
    assert whole["output"]["message"]["content"][0]["toolUse"]["name"] == "list_files"
    assert events[1]["contentBlockStart"]["start"]["toolUse"]["name"] == "list_files"
    assert missed.status_code == 404 and missed.headers["x-amzn-errortype"] == "ResourceNotFoundException"


def test_the_model_id_reaches_the_upstream_encoded_as_boto3_signed_it(tmp_path):
    # An ARN's '/' travels escaped inside the one modelId segment; decoded, it would split the path
    # the real service routes by, so the path goes upstream as the client sent it.
    mock = create_app()
    seen: list[bytes] = []

    async def upstream(scope, receive, send):
        if scope["type"] == "http":
            seen.append(scope["raw_path"])
        await mock(scope, receive, send)

    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.plan"
    with serve_in_thread(upstream) as url, record(url, tmp_path / "arn.json") as proxy:
        _client(proxy.root_url).converse(modelId=arn, messages=[_user(QUESTION)])
        list(_client(proxy.root_url).converse_stream(modelId=arn, messages=[_user(QUESTION)])["stream"])
    sent = b"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.plan"
    assert seen == [sent + b"/converse", sent + b"/converse-stream"]


def test_count_tokens_passes_through_unrecorded(tmp_path):
    out = tmp_path / "other.json"
    with serve_in_thread() as upstream, record(upstream, out) as proxy:
        counted = _client(proxy.root_url).count_tokens(
            modelId="plan", input={"converse": {"messages": [_user("hi")]}})
    assert counted["inputTokens"] > 0
    assert not out.exists()


def _frames(*events: tuple[str, dict]) -> bytes:
    return b"".join(bedrock_eventstream.event(kind, data) for kind, data in events)


def test_a_stream_is_read_frame_by_frame_and_half_a_stream_is_not_recorded():
    whole = _frames(("messageStart", {"role": "assistant"}),
                    ("contentBlockDelta", {"delta": {"text": "he"}, "contentBlockIndex": 0}),
                    ("contentBlockDelta", {"delta": {"text": "llo"}, "contentBlockIndex": 0}),
                    ("messageStop", {"stopReason": "end_turn"}),
                    ("metadata", {"usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5},
                                  "metrics": {"latencyMs": 1}}))
    stream = ConverseStream()
    for i in range(0, len(whole), 7):  # bytes arrive in any cut
        stream.feed(whole[i:i + 7])
    assert stream.reply() == {"content": "hello", "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    failed = ConverseStream()
    failed.feed(_frames(("messageStart", {"role": "assistant"}))
                + bedrock_eventstream.exception("modelStreamErrorException", {"message": "x"}))
    with pytest.raises(NotRecordable, match="modelStreamErrorException"):
        failed.reply()
    corrupted = ConverseStream()
    corrupted.feed(bedrock_eventstream.corrupted(whole))
    with pytest.raises(NotRecordable, match="malformed"):
        corrupted.reply()
    with pytest.raises(NotRecordable, match="error"):
        converse_reply(b'{"message": "Too many requests"}')
