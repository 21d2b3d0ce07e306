"""Azure OpenAI: the chat and responses surfaces behind Azure's routes, key header and errors.

The routes, as `openai.AzureOpenAI` and the plain `OpenAI` client pointed at `/openai/v1/` send them:

- `/openai/deployments/{deployment}/chat/completions` and `…/responses`: the deployment's name is
  the model (a scenario, options suffix allowed); the body's `model` is ignored, as Azure does;
- `/openai/responses`: where AzureOpenAI sends `responses.create`, the body's `model` naming it;
- `/openai/v1/chat/completions` and `/openai/v1/responses`: the body's `model`, no api-version.

Every route but the v1 ones requires `?api-version=`: a missing one is Azure's 404 "Resource not
found", one that is not a real date (`YYYY-MM-DD`, `-preview` allowed) from 2022-12-01 on is its
400 "API version not supported". The key comes as `api-key` (or a bearer token: `steps.authorize`).

Errors: what Azure's gateway refuses (no such route, version or deployment, a wrong key) has its
own shape, `{"error": {"code", "message"}}`; a 429 too, with `retry-after-ms` beside `retry-after`;
what the model refuses (an empty `messages`, say) keeps OpenAI's shape, as Azure passes it on.
Every reply carries `apim-request-id` (the request's id). With the `content_filter=on` option, chat
replies carry Azure's `prompt_filter_results` and each choice's `content_filter_results`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from mockprovider.apis import chat, embeddings, responses
from mockprovider.apis.steps import config_of, read_json
from mockprovider.errors import APIError
from mockprovider.replies import headers

_VERSION = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:-preview)?")
_FIRST_VERSION = date(2022, 12, 1)
"""The first generally available data-plane version; anything older is refused."""

_DEPLOYMENT_NOT_FOUND = (
    "The API deployment for this resource does not exist. If you created the deployment within "
    "the last 5 minutes, please wait a moment and try again."
)
_ACCESS_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
    "valid key for an active subscription and use a correct regional API endpoint for your resource."
)
_SAFE = {category: {"filtered": False, "severity": "safe"}
         for category in ("hate", "self_harm", "sexual", "violence")}


class AzureError(APIError):
    """An error in Azure's gateway shape: `code` is always given, there is no `type` or `param`."""

    def body(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


def _not_found() -> AzureError:
    return AzureError(404, "Resource not found", code="404")


def _check_version(request: Request) -> None:
    version = request.query_params.get("api-version")
    if version is None:
        raise _not_found()
    m = _VERSION.fullmatch(version)
    try:
        valid = m is not None and date(int(m[1]), int(m[2]), int(m[3])) >= _FIRST_VERSION
    except ValueError:  # not a calendar date
        valid = False
    if not valid:
        raise AzureError(400, "API version not supported", code="BadRequest")


def _azure(exc: APIError) -> APIError:
    """`exc` as Azure answers it: the gateway's refusals in its shape, the model's in OpenAI's."""
    if exc.status == 401:
        return AzureError(401, _ACCESS_DENIED, code="401", headers=exc.headers)
    if exc.code == "model_not_found":
        return AzureError(404, _DEPLOYMENT_NOT_FOUND, code="DeploymentNotFound")
    if exc.status == 429:
        return AzureError(429, exc.message, code="429", headers=exc.headers)
    return exc


def _returned(response: Response) -> APIError | None:
    """The error a surface answered with (an injected fault's) rather than raised, to reshape;
    None for a body that is not an error object (left as it is)."""
    try:
        error = json.loads(response.body)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    kept = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
    return APIError(response.status_code, str(error.get("message", "")), code=error.get("code"), headers=kept)


def _retry_after_ms(response: Response) -> None:
    """A 429's `retry-after-ms` (Azure sends it, and the openai client prefers it), from its
    `retry-after` seconds when the reply does not state it already."""
    if "retry-after-ms" not in response.headers and (seconds := response.headers.get("retry-after")):
        try:
            response.headers["retry-after-ms"] = str(int(float(seconds) * 1000))
        except ValueError:  # a date: nothing to convert
            pass


def _filtered(body: bytes) -> bytes:
    """A chat reply's JSON with Azure's content-filter results, every category safe."""
    out = json.loads(body)
    out["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": _SAFE}]
    for choice in out.get("choices", ()):
        choice["content_filter_results"] = _SAFE
    return json.dumps(out, separators=(",", ":")).encode()


async def _filtered_stream(events: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """A chat stream as Azure sends it with its filters: a first chunk with no choices carrying the
    prompt's results, then each chunk's choices carrying theirs. Other lines pass as they are."""
    first = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
             "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _SAFE}]}
    yield chat.sse(first)
    async for event in events:
        data = event if isinstance(event, bytes) else str(event).encode()
        if data.startswith(b"data: {"):
            chunk = json.loads(data[6:])
            if chunk.get("choices"):
                for choice in chunk["choices"]:
                    choice["content_filter_results"] = _SAFE
                data = chat.sse(chunk)
        yield data


def _with_filters(response: Response) -> Response:
    if isinstance(response, StreamingResponse):
        # A plain reply cut by a `drop` fault streams too: its broken JSON is left as it is.
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            response.body_iterator = _filtered_stream(response.body_iterator)
        return response
    try:
        filtered = _filtered(response.body)
    except ValueError:  # a `malformed` fault's broken body: sent broken, as scripted
        return response
    response.body = filtered
    response.headers["content-length"] = str(len(filtered))
    return response


async def _answer(request: Request, surface: str, deployment: str | None) -> Response:
    if surface == "embeddings":
        return await embeddings.answer(request, deployment)
    if surface == "chat":
        out = await chat.answer(request, deployment)
        return Response(out, media_type="application/json") if isinstance(out, bytes) else out
    body = await read_json(request, config_of(request), whole_unicode=True)
    if deployment is not None and isinstance(body, dict):
        body = {**body, "model": deployment}
    return await responses.answer(request, body)


async def _serve(request: Request, surface: str, *, versioned: bool, deployed: bool) -> Response:
    try:
        if versioned:
            _check_version(request)
        deployment = request.path_params["deployment"] if deployed else None
        response = await _answer(request, surface, deployment)
    except APIError as exc:
        response = _azure(exc).response()
    else:
        if response.status_code in (401, 429) and not isinstance(response, StreamingResponse):
            if (returned := _returned(response)) is not None:
                response = _azure(returned).response()
    if response.status_code == 429:
        _retry_after_ms(response)
    else:
        options = request.scope.get(headers.OPTIONS)
        filters = options is not None and options.content_filter
        if surface == "chat" and response.status_code == 200 and filters:
            response = _with_filters(response)
    response.headers["apim-request-id"] = headers.request_id(request.scope)
    return response


def _route(path: str, surface: str, *, versioned: bool = True, deployed: bool = False) -> Route:
    async def endpoint(request: Request) -> Response:
        return await _serve(request, surface, versioned=versioned, deployed=deployed)

    return Route(path, endpoint, methods=["POST"], name=f"azure {path}")


async def _unknown(request: Request) -> Response:
    """Any other path under /openai: Azure's 404, in its shape."""
    response = _not_found().response()
    response.headers["apim-request-id"] = headers.request_id(request.scope)
    return response


ROUTES = [
    _route("/openai/deployments/{deployment}/chat/completions", "chat", deployed=True),
    _route("/openai/deployments/{deployment}/responses", "responses", deployed=True),
    _route("/openai/deployments/{deployment}/embeddings", "embeddings", deployed=True),
    _route("/openai/responses", "responses"),
    _route("/openai/v1/chat/completions", "chat", versioned=False),
    _route("/openai/v1/responses", "responses", versioned=False),
    _route("/openai/v1/embeddings", "embeddings", versioned=False),
    Route("/openai/{rest:path}", _unknown, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
]
