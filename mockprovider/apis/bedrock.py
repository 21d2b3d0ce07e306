"""Amazon Bedrock's Converse API over the same scripts, stateless.

`POST /model/{modelId}/converse` and `/model/{modelId}/converse-stream`, as boto3's
`bedrock-runtime` client sends them (`endpoint_url=` the mock); `/count-tokens` answers what
`usage.inputTokens` of the same request would be. The model id stands for the scenario, as the
model name does elsewhere (`plan`, `plan+latency=250`): URL-decoded, an ARN
(`arn:aws:bedrock:…:inference-profile/us.plan`) by its last path segment, and a cross-region
inference profile's geography prefix (`us.`, `eu.`, `apac.`, `global.` …) dropped when the name
without it is a scenario. The request becomes the chat conversation it stands for
(`bedrock_request`):

- `system` (text blocks)               → a system message first
- a user message                       → a tool message per `toolResult` block (answering its
                                         `toolUseId`; `status: "error"` too, its text what the
                                         script reads), then a user message of its text, if any
- an assistant message                 → an assistant message of its text, with a tool call per
                                         `toolUse` block (`input` as compact JSON arguments)
- `toolConfig.tools[].toolSpec`        → chat function definitions; `toolChoice` auto/any/tool
- `inferenceConfig.maxTokens`          → the usual token cut (`stopReason: max_tokens`)
- `cachePoint` blocks                  → the cache's breakpoints (Anthropic's rule, docs/caching.md):
                                         `usage` then states `cacheReadInputTokens` and
                                         `cacheWriteInputTokens`, and `inputTokens` is the rest

A stream is AWS's binary event stream (`bedrock_eventstream`): messageStart, per block its
contentBlockStart (tool use only, as Bedrock sends them), contentBlockDelta events and
contentBlockStop, then messageStop and metadata (usage, `metrics.latencyMs`). A scripted
reasoning text is a `reasoningContent` block first, as Claude on Bedrock sends it.

Auth: a SigV4 `Authorization` header is accepted without verifying its signature; with
`--api-key`, its access key id (or a Bedrock API key sent as a bearer token) must be the key.
Errors are AWS's shape: `{"message"}` with the exception's name in `x-amzn-ErrorType`, and every
reply carries `x-amzn-RequestId`. The attempt is boto3's own count (`amz-sdk-request: attempt=N`).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis import bedrock_eventstream as frames
from mockprovider.apis.bedrock_request import converse_request
from mockprovider.apis.shared import (
    ChatShaped,
    as_json,
    json_response,
    reasoning_signature,
    scripted_turn,
    streamed,
    streamed_input,
    tool_input,
)
from mockprovider.apis.steps import authorize, config_of, read_raw, resolve
from mockprovider.errors import APIError, ScriptedError, invalid
from mockprovider.reading import attempts, transcript
from mockprovider.reading.request_headers import header_map
from mockprovider.reading.validation import parse_body
from mockprovider.replies import completions

EVENT_STREAM = "application/vnd.amazon.eventstream"
ERROR_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
GEOGRAPHIES = frozenset({"us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"})
"""The prefixes of Bedrock's cross-region inference profiles (`us.anthropic.claude-…`)."""
_REQUEST_ID = "mockprovider.aws_request_id"
_REGION = re.compile(rb"[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}")
_ATTEMPT = re.compile(rb"(?:^|;)\s*attempt=([0-9]{1,6})\s*(?:;|$)")


def request_id(request: Request | None) -> str:
    """The request's id, a UUID as AWS gives one, made once per request (a fresh one without it)."""
    if request is None:
        return str(uuid.uuid4())
    rid = request.scope.get(_REQUEST_ID)
    if rid is None:
        rid = request.scope[_REQUEST_ID] = str(uuid.uuid4())
    return rid


def _reshaped(e: APIError) -> tuple[int, str, str]:
    """(status, exception name, message) of `e` as Bedrock answers it."""
    if isinstance(e, ScriptedError) and e.given_type and e.type.endswith("Exception"):
        return e.status, e.type, e.message  # a script naming an AWS exception gets it as it is
    if e.code == "model_not_found":
        return 400, "ValidationException", f"The provided model identifier is invalid. ({e.message})"
    if e.status == 401:
        return 403, "UnrecognizedClientException", "The security token included in the request is invalid."
    if e.status == 504:  # the hang fault, given up
        return 408, "ModelTimeoutException", "Model has timed out in processing the request. (injected fault)"
    if e.status == 529:  # Bedrock sends no 529: an overloaded model is its 503, which boto3 retries
        return 503, "ServiceUnavailableException", ("Bedrock is unable to process your request. "
                                                    "(injected fault)")
    kind = ERROR_TYPES.get(e.status, "ValidationException" if e.status < 500 else "InternalServerException")
    if e.status == 429 and not isinstance(e, ScriptedError):
        return 429, kind, "Too many requests, please wait before trying again. (injected fault)"
    return e.status, kind, e.message


def error_response(e: APIError, request: Request | None = None) -> Response:
    """`e` in AWS's shape: `{"message"}`, the exception's name in `x-amzn-ErrorType`."""
    status, kind, message = _reshaped(e)
    # AWS states no retry-after; a script's own headers are sent as it wrote them.
    kept = e.headers if isinstance(e, ScriptedError) else {
        k: v for k, v in e.headers.items() if k not in ("retry-after", "retry-after-ms")}
    return json_response({"message": message}, status=status,
                         headers={**kept, "x-amzn-ErrorType": kind, "x-amzn-RequestId": request_id(request)})


# --- the reply ------------------------------------------------------------------------------


def _content(c: completions.Completion) -> list[dict[str, Any]]:
    """The reply's blocks: its reasoning, its text (when there is any), then a toolUse per call."""
    blocks: list[dict[str, Any]] = []
    if c.reasoning_tokens and c.reasoning is None:
        hidden = reasoning_signature(str(c.reasoning_tokens))
        blocks.append({"reasoningContent": {"redactedContent": hidden}})
    elif c.reasoning_tokens:
        text = {"text": c.reasoning, "signature": reasoning_signature(c.reasoning or "")}
        blocks.append({"reasoningContent": {"reasoningText": text}})
    if c.content is not None or not (c.tool_calls or c.reasoning_tokens):
        blocks.append({"text": c.content or ""})
    blocks += [{"toolUse": {"toolUseId": call.id, "name": call.name, "input": tool_input(call.arguments)}}
               for call in c.tool_calls]
    return blocks


def _usage(c: completions.Completion, cached: bool) -> dict[str, int]:
    """Bedrock's usage: with cachePoints, `inputTokens` is what neither read nor wrote the cache."""
    usage = {"inputTokens": c.prompt_tokens - c.cache.read - c.cache.write,
             "outputTokens": c.completion_tokens, "totalTokens": c.prompt_tokens + c.completion_tokens}
    if cached:
        usage |= {"cacheReadInputTokens": c.cache.read, "cacheWriteInputTokens": c.cache.write}
    return usage


def body(c: completions.Completion, cached: bool, latency_ms: int) -> dict[str, Any]:
    """The whole Converse response."""
    return {"output": {"message": {"role": "assistant", "content": _content(c)}},
            "stopReason": STOP_REASONS[c.finish_reason], "usage": _usage(c, cached),
            "metrics": {"latencyMs": latency_ms}}


def _deltas(block: dict[str, Any], arguments: str, chunk: int) -> list[tuple[dict[str, Any], int]]:
    """A block's deltas, each with the tokens it carries."""
    if "toolUse" in block:
        pieces = completions.weighed_deltas(streamed_input(arguments), chunk)
        return [({"toolUse": {"input": p}}, n) for p, n in pieces]
    if "text" in block:
        return [({"text": p}, n) for p, n in completions.weighed_deltas(block["text"], chunk)]
    reasoning = block["reasoningContent"]
    if "redactedContent" in reasoning:
        return [({"reasoningContent": reasoning}, 0)]
    text = reasoning["reasoningText"]
    pieces = completions.weighed_deltas(text["text"], chunk)
    return [*(({"reasoningContent": {"text": p}}, n) for p, n in pieces),
            ({"reasoningContent": {"signature": text["signature"]}}, 0)]


def events(c: completions.Completion, cached: bool, latency_ms: int) -> Iterator[tuple[bytes, int]]:
    """messageStart, each block's (start,) deltas and stop, messageStop, metadata."""
    yield frames.event("messageStart", {"role": "assistant"}), 0
    blocks = _content(c)
    arguments = [""] * (len(blocks) - len(c.tool_calls)) + [call.arguments for call in c.tool_calls]
    for index, block in enumerate(blocks):
        if "toolUse" in block:
            start = {"toolUseId": block["toolUse"]["toolUseId"], "name": block["toolUse"]["name"]}
            started = {"start": {"toolUse": start}, "contentBlockIndex": index}
            yield frames.event("contentBlockStart", started), 0
        for delta, tokens in _deltas(block, arguments[index], c.chunk):
            yield frames.event("contentBlockDelta", {"delta": delta, "contentBlockIndex": index}), tokens
        yield frames.event("contentBlockStop", {"contentBlockIndex": index}), 0
    yield frames.event("messageStop", {"stopReason": STOP_REASONS[c.finish_reason]}), 0
    yield frames.event("metadata", {"usage": _usage(c, cached), "metrics": {"latencyMs": latency_ms}}), 0


def stream_error(_: int) -> bytes:
    """What Bedrock sends when the model's stream fails after it started (boto3 raises it)."""
    return frames.exception("modelStreamErrorException", {
        "message": "The model's stream failed after it started (injected fault).",
        "originalStatusCode": 500, "originalMessage": "stream_error (injected fault)"})


MALFORMED_STREAM = frames.corrupted(frames.event("messageStart", {"role": "assistant"}))
"""What the `malformed` fault streams: a frame whose CRC does not match, which a client refuses."""


# --- the endpoints --------------------------------------------------------------------------


def scenario_of(model_id: str, known: Mapping[str, Any]) -> str:
    """The model name a model id stands for: an ARN's last path segment, less an inference
    profile's geography prefix when the name without it is a scenario (`known`)."""
    name = model_id.rpartition("/")[2] if model_id.startswith("arn:") else model_id
    geography, dot, rest = name.partition(".")
    if dot and geography in GEOGRAPHIES and name.partition("+")[0] not in known:
        return rest
    return name


def parse(raw: bytes) -> Any:
    return parse_body(raw, unparsable="Malformed input request: {error}, please reformat your input and try "
                                      "again.")


def sdk_attempt(request: Request, raw: bytes) -> None:
    """boto3's own count of this call's attempts (`amz-sdk-request: attempt=1; max=3`, from 1) as
    the attempt faults are keyed by; a client that sends none has its repeats counted instead."""
    headers = header_map(request)
    sent = headers.get(b"amz-sdk-request")
    found = _ATTEMPT.search(sent) if sent is not None else None
    if found is None or b"x-lab-attempt" in headers or b"x-stainless-retry-count" in headers:
        attempts.fill_in(request, raw)
        return
    headers[b"x-lab-attempt"] = b"%d" % max(int(found[1]) - 1, 0)  # type: ignore[index]


async def _request(request: Request, *, stream: bool) -> tuple[ChatShaped, bytes]:
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    config = config_of(request)
    raw = await read_raw(request, config)
    model = scenario_of(request.path_params["model_id"], config.scenarios)
    return converse_request(parse(raw), model=model, stream=stream), raw


async def _converse(request: Request, stream: bool) -> Response:
    started = time.perf_counter()
    req, raw = await _request(request, stream=stream)
    sdk_attempt(request, raw)
    turn = await scripted_turn(request, config_of(request), req, midstream_faults=True)
    if isinstance(turn, APIError):
        return error_response(turn, request)
    if isinstance(turn, bytes):  # the malformed fault
        return Response(MALFORMED_STREAM, media_type=EVENT_STREAM) if stream else Response(
            turn, media_type="application/json")
    if turn.cut is None:  # a reply a fault breaks is no answer: the same request again is the next attempt
        attempts.settle(request)
    latency_ms = int((time.perf_counter() - started) * 1000)
    cached = bool(req.cache_breakpoints)
    if stream:
        return streamed(turn, events(turn.completion, cached, latency_ms), stream_error,
                        media_type=EVENT_STREAM)
    return as_json(turn, body(turn.completion, cached, latency_ms))


async def _count_tokens(request: Request) -> Response:
    """What `usage.inputTokens` of the same Converse request would be (`input.converse`)."""
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    config = config_of(request)
    raw = await read_raw(request, config)
    given = parse(raw)
    inner = given.get("input") if isinstance(given, dict) else None
    converse = inner.get("converse") if isinstance(inner, dict) else None
    if not isinstance(converse, dict):
        raise invalid("input.converse: expected the Converse request to count.", param="input")
    model = scenario_of(request.path_params["model_id"], config.scenarios)
    req = converse_request(converse, model=model, stream=False)
    resolve(request, config, model)  # an unknown model is refused here too
    read = transcript.read(req.messages, paired=req.paired)
    return json_response({"inputTokens": await transcript.prompt_tokens(read, req.tools)})


def endpoint(answer: Any) -> Any:
    """An endpoint of `answer`: its errors in AWS's shape, every reply with the request's id."""

    async def serve(request: Request) -> Response:
        try:
            response = await answer(request)
        except APIError as e:
            return error_response(e, request)
        except RecursionError:  # a body nested nearly to the parser's limit, overflowing further down
            return error_response(invalid("Malformed input request: nested too deeply."), request)
        response.headers["x-amzn-RequestId"] = request_id(request)
        return response

    return serve


def _region(request: Request) -> str:
    """The region a SigV4 signature names in its credential scope (`AKID/DATE/REGION/...`)."""
    scope = (header_map(request).get(b"authorization") or b"").partition(b"Credential=")[2].split(b"/")
    return scope[2].decode() if len(scope) > 2 and _REGION.fullmatch(scope[2]) else "us-east-1"


async def _foundation_models(request: Request) -> Response:
    """`GET /foundation-models` (the `bedrock` control plane's ListFoundationModels): every scenario,
    as a text model that streams."""
    config = config_of(request)
    authorize(request, config)
    region = _region(request)
    return json_response({"modelSummaries": [
        {"modelArn": f"arn:aws:bedrock:{region}::foundation-model/{name}", "modelId": name, "modelName": name,
         "providerName": "mockprovider", "inputModalities": ["TEXT"], "outputModalities": ["TEXT"],
         "responseStreamingSupported": True, "customizationsSupported": [],
         "inferenceTypesSupported": ["ON_DEMAND"], "modelLifecycle": {"status": "ACTIVE"}}
        for name in config.scenarios]})


async def _unknown(request: Request) -> Response:
    raise APIError(404, f"{request.method} {request.url.path}: not served here; this mock serves "
                        "/model/{modelId}/converse, /converse-stream, /count-tokens and /invoke "
                        "(Titan text embeddings).")


converse = endpoint(lambda request: _converse(request, False))
converse_stream = endpoint(lambda request: _converse(request, True))
count_tokens = endpoint(_count_tokens)
foundation_models = endpoint(_foundation_models)
unknown = endpoint(_unknown)

# Every method reaches each endpoint, so a wrong one is refused in AWS's shape too.
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_PREFIXES = ("", "/o/{options}")
ROUTES = [
    # `path`: a model id may be an ARN, whose '/' the client sent encoded and the server decoded.
    *(Route(f"{prefix}/model/{{model_id:path}}/{name}", endpoint, methods=_ANY)
      for prefix in _PREFIXES
      for name, endpoint in (("converse", converse), ("converse-stream", converse_stream),
                             ("count-tokens", count_tokens))),
    *(Route(f"{prefix}/model/{{rest:path}}", unknown, methods=_ANY) for prefix in _PREFIXES),
    *(Route(f"{prefix}/foundation-models", foundation_models, methods=["GET"]) for prefix in _PREFIXES),
]
