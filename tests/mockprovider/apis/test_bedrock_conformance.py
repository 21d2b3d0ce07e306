"""Every Converse body and event the mock sends fits botocore's own model of the Bedrock Runtime
service (the shapes boto3 is generated from): each member a member of its shape, of its type,
every required one present, each union holding one member. Reasoning, caching, a cut and the
error bodies included."""

from __future__ import annotations

import base64
import json
from typing import Any

import botocore.session
import httpx
import pytest
from botocore.eventstream import EventStreamBuffer

from mockprovider.app import create_app
from mockprovider.server import serve_in_thread

MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")
USER = {"role": "user", "content": [{"text": "Which file mentions a timeout?"}]}
TOOLS = {"tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}
                   for n in ("list_files", "read_file")]}
THINKER = {"name": "thinker", "turns": [{"content": "Two.", "reasoning": "One plus one is two."},
                                        {"tool_calls": [{"name": "list_files", "arguments": {}}],
                                         "reasoning": 9}]}
CASES = {
    "a tool call": {"messages": [USER], "toolConfig": TOOLS},
    "text": {"messages": [USER]},
    "a cut": {"messages": [USER], "inferenceConfig": {"maxTokens": 2}},
    "the second turn": {"messages": [USER, {"role": "assistant", "content": [{"text": "Two."}]}, USER],
                        "toolConfig": TOOLS},
    "cache points": {"messages": [USER],
                     "system": [{"text": "Be brief. " * 400}, {"cachePoint": {"type": "default"}}]},
}


def conforms(value: Any, shape, path: str = "$") -> list[str]:
    """Where `value` (as JSON on the wire) departs from `shape`."""
    kind = shape.type_name
    if shape.metadata.get("document"):
        return []  # a document (a tool's input) holds any JSON
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object"]
        problems = [f"{path}.{k}: not a member of {shape.name}" for k in value if k not in shape.members]
        if shape.metadata.get("union") and len(value) != 1:
            problems.append(f"{path}: a union holds exactly one member, not {sorted(value)}")
        problems += [f"{path}.{k}: required by {shape.name}"
                     for k in shape.required_members if k not in value]
        for k, v in value.items():
            if k in shape.members:
                problems += conforms(v, shape.members[k], f"{path}.{k}")
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: not an array"]
        return [p for i, v in enumerate(value) for p in conforms(v, shape.member, f"{path}[{i}]")]
    if kind == "string":
        ok = isinstance(value, str) and (not shape.enum or value in shape.enum)
        return [] if ok else [f"{path}: {value!r} is not a string of {shape.enum or 'any value'}"]
    if kind in ("integer", "long"):
        return [] if type(value) is int else [f"{path}: {value!r} is not an integer"]
    if kind == "blob":
        try:
            base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            return [f"{path}: not base64"]
        return []
    return []


@pytest.fixture(scope="module")
def root():
    with serve_in_thread(create_app(scenario_files=[THINKER])) as url:
        yield url.removesuffix("/v1")


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("model", ["plan", "thinker"])
def test_a_converse_reply_fits_the_service_model(root, body, model):
    reply = httpx.post(f"{root}/model/{model}/converse", json=body)
    assert reply.status_code == 200, reply.text
    assert conforms(reply.json(), MODEL.operation_model("Converse").output_shape) == []


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("model", ["plan", "thinker"])
def test_every_streamed_event_fits_its_shape_in_the_service_model(root, body, model):
    reply = httpx.post(f"{root}/model/{model}/converse-stream", json=body)
    buffer = EventStreamBuffer()
    buffer.add_data(reply.content)
    union = MODEL.shape_for("ConverseStreamOutput")
    kinds = []
    for message in buffer:
        kind = message.headers[":event-type"]
        kinds.append(kind)
        assert conforms(json.loads(message.payload), union.members[kind], kind) == []
    assert kinds[0] == "messageStart" and kinds[-2:] == ["messageStop", "metadata"]


def test_errors_and_a_mid_stream_exception_fit_their_exception_shapes(root):
    for model, status in (("plann", 400), ("plan+fault=429@0", 429), ("plan+fault=500@0", 500)):
        reply = httpx.post(f"{root}/model/{model}/converse", json={"messages": [USER]})
        kind = reply.headers["x-amzn-errortype"]
        assert reply.status_code == status == MODEL.shape_for(kind).metadata["error"]["httpStatusCode"]
        assert conforms(reply.json(), MODEL.shape_for(kind)) == []
    reply = httpx.post(f"{root}/model/plan+fault=stream_error:1@0/converse-stream", json={"messages": [USER]})
    buffer = EventStreamBuffer()
    buffer.add_data(reply.content)
    last = list(buffer)[-1]
    kind = last.headers[":exception-type"]
    shape = MODEL.shape_for("ConverseStreamOutput").members[kind]
    assert last.headers[":message-type"] == "exception"
    assert conforms(json.loads(last.payload), shape) == []


def test_the_check_sees_a_departure():
    output = MODEL.operation_model("Converse").output_shape
    planted = {"output": {"message": {"role": "assistant", "content": [{"text": "a", "toolUse": {}}]}},
               "stopReason": "done", "usage": {"inputTokens": "1", "outputTokens": 1}, "metric": {}}
    assert conforms(planted, output) == [
        "$.metric: not a member of ConverseResponse",
        "$.metrics: required by ConverseResponse",
        "$.output.message.content[0]: a union holds exactly one member, not ['text', 'toolUse']",
        "$.output.message.content[0].toolUse.toolUseId: required by ToolUseBlock",
        "$.output.message.content[0].toolUse.name: required by ToolUseBlock",
        "$.output.message.content[0].toolUse.input: required by ToolUseBlock",
        "$.stopReason: 'done' is not a string of " + repr(MODEL.shape_for("StopReason").enum),
        "$.usage.totalTokens: required by TokenUsage",
        "$.usage.inputTokens: '1' is not an integer",
    ]


def test_the_listing_fits_the_control_planes_model(root):
    control = botocore.session.get_session().get_service_model("bedrock")
    listing = httpx.get(f"{root}/foundation-models").json()
    assert conforms(listing, control.operation_model("ListFoundationModels").output_shape) == []
