"""Google's Gemini API over the same scripts, stateless.

`POST /v1beta/models/{model}:generateContent` and `:streamGenerateContent`, and the same under
`/v1/` (where google-genai posts when given only a base URL); `GET /v1beta/models` lists every
scenario and `GET /v1beta/models/{model}` describes one (`GET /v1/models` stays OpenAI's, except to
a request carrying google-genai's `x-goog-api-client` header). The
request becomes the chat conversation it stands for (`gemini_request`), so the turn index is the
number of `model` contents and `promptTokenCount` is the chat formula over that conversation.

A stream is server-sent events with `?alt=sse` (as google-genai asks for it), otherwise one
JSON array whose elements arrive one by one; each element is a `GenerateContentResponse`
carrying one token of text (or every function call at once, as Gemini sends them), and the
last one the `finishReason` and `usageMetadata`. `finishReason` is STOP for text and function
calls alike and MAX_TOKENS when `generationConfig.maxOutputTokens` cut the reply. A stream that
fails after it started (the `stream_error` fault) carries `{"error": {...}}` as its next
element, which google-genai raises mid-iteration.

Vertex AI serves the same methods under `/{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/
models/{model}:{method}` (google-genai in Vertex mode posts to `/v1beta1/...`, Google's REST samples
to `/v1/...`): the same request, reply and errors; the project and location are not checked, and
the OAuth bearer token Vertex's clients send is accepted as a key (`steps.authorize`).

`:countTokens` answers what `promptTokenCount` of the same request would be. The key may come
as `x-goog-api-key` or `?key=`. Every error, the shared steps' included, is
in Google's shape `{"error": {"code", "message", "status"}}` with its status names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.gemini_request import generate_request
from mockprovider.apis.shared import as_json, json_response, scripted_turn, streamed, suffix
from mockprovider.apis.steps import authorize, config_of, read_raw, resolve
from mockprovider.errors import APIError, ScriptedError, invalid
from mockprovider.reading import attempts, transcript
from mockprovider.reading.validation import parse_body
from mockprovider.replies import completions
from mockprovider.replies.headers import from_google_genai
from mockprovider.scripts import scenarios

STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
FINISH_REASONS = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"}
METHODS = ("generateContent", "streamGenerateContent", "countTokens")


def error_response(e: APIError) -> Response:
    """`e` in Google's shape; a 429 says when to retry as Google does, in a RetryInfo detail."""
    if e.status == 529 and not isinstance(e, ScriptedError):
        # The overload fault as Google sends it (it never sends a 529), which google-genai retries.
        e = APIError(503, "The model is overloaded. Please try again later. (injected fault)",
                     headers=e.headers)
    status = STATUS.get(e.status, "INVALID_ARGUMENT" if e.status < 500 else "INTERNAL")
    error: dict[str, Any] = {"code": e.status, "message": e.message, "status": status}
    headers = e.headers
    retry_ms = e.headers.get("retry-after-ms")
    if e.status == 429 and retry_ms is not None:
        delay = f"{int(retry_ms) / 1000:g}s"
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]
        # Google states the delay in the body only; the headers are OpenAI's and Anthropic's.
        headers = {k: v for k, v in e.headers.items() if k not in ("retry-after", "retry-after-ms")}
    return json_response({"error": error}, status=e.status, headers=headers)


def _parse(raw: bytes) -> Any:
    return parse_body(raw, unparsable="Invalid JSON payload received. {error}")


# --- the reply ------------------------------------------------------------------------------


def _call_parts(c: completions.Completion) -> list[dict[str, Any]]:
    """The functionCall parts of the reply (`completions.object_calls`: a call a cut left
    unfinished is left out)."""
    return [{"functionCall": {"id": call.id, "name": call.name, "args": args}}
            for call, args in completions.object_calls(c)]


def _usage(c: completions.Completion) -> dict[str, Any]:
    """Gemini's usageMetadata: thoughts are counted apart from the candidates (the total holds
    both), and the cached part of the prompt, a part of promptTokenCount, is given only when
    there is one (implicit caching; the mock's model of it is docs/caching.md's OpenAI rule)."""
    usage: dict[str, Any] = {
        "promptTokenCount": c.prompt_tokens,
        "candidatesTokenCount": c.completion_tokens - c.reasoning_tokens,
        "totalTokenCount": c.prompt_tokens + c.completion_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": c.prompt_tokens}],
    }
    if c.cache.read:
        usage["cachedContentTokenCount"] = c.cache.read
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": c.cache.read}]
    if c.reasoning_tokens:
        usage["thoughtsTokenCount"] = c.reasoning_tokens
    return usage


def _response(c: completions.Completion, parts: list[dict[str, Any]], *, last: bool) -> dict[str, Any]:
    """A GenerateContentResponse holding `parts`; the `last` one of a reply finishes it."""
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate]}
    if last:
        candidate["finishReason"] = FINISH_REASONS[c.finish_reason]
        out["usageMetadata"] = _usage(c)
    out["modelVersion"] = c.model
    out["responseId"] = suffix(c)
    return out


def body(c: completions.Completion) -> dict[str, Any]:
    """The whole reply in one GenerateContentResponse."""
    calls = _call_parts(c)
    text = [{"text": c.content or ""}] if c.content is not None or not calls else []
    return _response(c, text + calls, last=True)


def chunks(c: completions.Completion) -> Iterator[dict[str, Any]]:
    """The reply as a stream's GenerateContentResponses: one per delta of text, then one holding
    every function call; the last one finishes it."""
    return (data for data, _ in _weighed_chunks(c))


def _weighed_chunks(c: completions.Completion) -> Iterator[tuple[dict[str, Any], int]]:
    """`chunks(c)`, each with the tokens it carries: what a paced stream waits for after it."""
    calls = _call_parts(c)
    pieces = completions.weighed_deltas(c.content or "", c.chunk) or ([] if calls else [("", 0)])
    for k, (piece, tokens) in enumerate(pieces):
        yield _response(c, [{"text": piece}], last=not calls and k == len(pieces) - 1), tokens
    if calls:
        yield _response(c, calls, last=True), completions.arguments_tokens(c)


def _dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def sse_events(c: completions.Completion) -> Iterator[tuple[bytes, int]]:
    for chunk, tokens in _weighed_chunks(c):
        yield f"data: {_dumps(chunk)}\r\n\r\n".encode(), tokens


def array_events(c: completions.Completion) -> Iterator[tuple[bytes, int]]:
    """The JSON-array stream: `[`, the elements separated by commas, `]`."""
    for k, (chunk, tokens) in enumerate(_weighed_chunks(c)):
        yield ("[" if k == 0 else ",\r\n").encode() + _dumps(chunk).encode(), tokens
    yield b"]", False


_STREAM_ERROR = {"error": {"code": 500, "status": "INTERNAL",
                           "message": "The server had an error while streaming (injected fault)."}}
"""What a stream that fails after it started carries in place of its next response."""


def sse_error(_: int) -> bytes:
    return f"data: {_dumps(_STREAM_ERROR)}\r\n\r\n".encode()


def array_error(sent: int) -> bytes:
    """The error as the array's last element, closing the array."""
    return (b",\r\n" if sent else b"[") + _dumps(_STREAM_ERROR).encode() + b"]"


# --- the endpoints --------------------------------------------------------------------------


async def _generate(request: Request) -> Response:
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    method = request.path_params["method"]
    if method not in METHODS:
        raise APIError(404, f"Method '{method}' is not served here; this mock serves {', '.join(METHODS)}.")
    stream = method == "streamGenerateContent"
    alt = request.query_params.get("alt", "json")
    if stream and alt not in ("sse", "json"):
        raise invalid(f"Invalid value for 'alt': {alt!r}; this mock streams alt=sse or alt=json.",
                      param="alt")
    config = config_of(request)
    raw = await read_raw(request, config)
    model = request.path_params["model"]
    if method == "countTokens":
        return await _count_tokens(request, _parse(raw), model)
    req = generate_request(_parse(raw), model=model, stream=stream)
    attempts.fill_in(request, raw)
    turn = await scripted_turn(request, config, req, midstream_faults=True)
    if isinstance(turn, APIError):
        return error_response(turn)
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    if turn.cut is None:  # a reply a fault breaks is no answer: the same request again is the next attempt
        attempts.settle(request)
    if not stream:
        return as_json(turn, body(turn.completion))
    if alt == "sse":
        return streamed(turn, sse_events(turn.completion), sse_error)
    return streamed(turn, array_events(turn.completion), array_error, media_type="application/json")


async def _count_tokens(request: Request, body: Any, model: str) -> Response:
    """What `promptTokenCount` of the same request would be: `contents` alone, or a whole
    `generateContentRequest` (with its systemInstruction and tools)."""
    if isinstance(body, dict) and body.get("generateContentRequest") is not None:
        body = body["generateContentRequest"]
    req = generate_request(body, model=model, stream=False)
    resolve(request, config_of(request), model)  # an unknown model is a 404 here too
    read = transcript.read(req.messages, paired=req.paired)
    total = await transcript.prompt_tokens(read, req.tools)
    return json_response({"totalTokens": total,
                          "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}]})


async def generate(request: Request) -> Response:
    try:
        return await _generate(request)
    except APIError as e:
        return error_response(e)
    except RecursionError:
        # A body nested nearly to the parser's limit parses, then overflows the stack deeper
        # down, where it is read or counted.
        return error_response(invalid("Invalid JSON payload received: nested too deeply."))


def _model(name: str, script: scenarios.Scenario) -> dict[str, Any]:
    return {"name": f"models/{name}", "version": "mockprovider", "displayName": name,
            "description": scenarios.describe(script), "supportedGenerationMethods": list(METHODS)}


async def list_models(request: Request) -> Response:
    try:
        config = config_of(request)
        authorize(request, config)
    except APIError as e:
        return error_response(e)
    return json_response({"models": [_model(name, script) for name, script in config.scenarios.items()]})


async def get_model(request: Request) -> Response:
    try:
        config = config_of(request)
        authorize(request, config)
        name = request.path_params["model"]
        script, _ = resolve(request, config, name)
    except APIError as e:
        return error_response(e)
    return json_response(_model(name, script))


async def get_model_v1(request: Request) -> Response:
    """`GET /v1/models/{model}`: google-genai given only a base URL describes a model here, naming
    itself in `x-goog-api-client`; OpenAI's path otherwise, where no model is described."""
    if not from_google_genai(request.scope):
        raise HTTPException(404)
    return await get_model(request)


async def not_found(request: Request) -> Response:
    """Any other path under /v1beta, or Vertex AI's (/v1beta1, /v1/projects, /v1/publishers): a 404
    in Google's shape, naming what is served."""
    return error_response(APIError(
        404, f"{request.method} {request.url.path}: not served here; this mock serves "
             "models/{model}:generateContent, :streamGenerateContent, :countTokens and models.",
    ))


# Every method reaches `generate`, so a wrong one is refused in Google's shape too.
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
PREFIXES = ("", "/o/{options}")
VERTEX = "projects/{project}/locations/{location}/publishers/google/models/{model}"
"""Where Vertex AI serves a Google model (under /v1/ and /v1beta1/); the project and location are
not checked."""
ROUTES = [
    *(Route(f"{prefix}/{version}/models/{{model}}:{{method}}", generate, methods=_ANY)
      for prefix in PREFIXES for version in ("v1beta", "v1")),
    *(Route(f"{prefix}/{version}/{VERTEX}:{{method}}", generate, methods=_ANY)
      for prefix in PREFIXES for version in ("v1beta1", "v1")),
    *(Route(f"{prefix}/v1beta/models", list_models, methods=["GET"]) for prefix in PREFIXES),
    *(Route(f"{prefix}/v1beta/models/{{model}}", get_model, methods=["GET"]) for prefix in PREFIXES),
    *(Route(f"{prefix}/v1/models/{{model}}", get_model_v1, methods=["GET"]) for prefix in PREFIXES),
    *(Route(f"{prefix}/{root}/{{path:path}}", not_found, methods=_ANY)
      for prefix in PREFIXES for root in ("v1beta", "v1beta1", "v1/projects", "v1/publishers")),
]
