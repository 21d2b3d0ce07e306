"""Ollama's embeddings, in Ollama's shape (`ollama.error_response`).

`POST /api/embed`: `{"model", "input": text or [texts], "truncate", "dimensions"}` →
`{"model", "embeddings": [[...]], "total_duration", "load_duration", "prompt_eval_count"}`; and the
older `POST /api/embeddings`: `{"model", "prompt"}` → `{"embedding": [...]}`. As Ollama does, an
empty `input` (or `prompt`) embeds nothing and answers an empty list, and an input past the
model's context is cut to it unless `truncate` is false (then a 400, "the input length exceeds the
context length"). Every vector is unit length, the older route's too (Ollama's is not normalised).

The model is a scenario (an embedding request is its turn 0: faults, latency, error replies) or a
real embedding model's name (`nomic-embed-text`, `mxbai-embed-large`, `all-minilm`, tag allowed),
whose length and context it keeps; a scenario embeds as `nomic-embed-text` does (768 numbers, 8192
tokens). Ollama itself takes any number of inputs; the mock refuses more than `MAX_INPUTS`, so
that one request cannot hold its memory.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.ollama import error_response, model_name
from mockprovider.apis.shared import (
    body_object,
    embedding_body,
    embedding_turn,
    json_response,
    model_of,
    token_counts,
    truncated,
)
from mockprovider.apis.steps import config_of, read_raw
from mockprovider.errors import APIError, invalid
from mockprovider.reading import attempts
from mockprovider.reading.validation import parse_body
from mockprovider.replies.embedding import KNOWN, EmbeddingModel, known

MAX_INPUTS = 2048
SCENARIO_MODEL = KNOWN["nomic-embed-text"]
"""The shape a scenario's name embeds as."""


def _inputs(body: dict[str, Any], legacy: bool) -> list[str]:
    value = body.get("prompt" if legacy else "input")
    if value is None or value == "":
        return []
    if legacy:
        if not isinstance(value, str):
            raise invalid("invalid prompt type")
        return [value]
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise invalid("invalid input type")
    if len(value) > MAX_INPUTS:
        raise invalid(f"too many inputs: {len(value)}; this mock embeds at most {MAX_INPUTS} in one request")
    return value


def _dimensions(body: dict[str, Any], shape: EmbeddingModel) -> int:
    asked = body.get("dimensions")
    if asked is None:
        return shape.dimensions
    most = shape.max_dimensions or shape.dimensions
    if type(asked) is not int or not 1 <= asked <= most:
        raise invalid(f"dimensions must be an integer from 1 to {most}, not {asked!r}")
    return asked


async def _fitted(texts: list[str], shape: EmbeddingModel, cut: Any) -> tuple[list[str], int]:
    """The texts, cut to the model's context where `truncate` allows it, and their tokens."""
    if not isinstance(cut, bool):
        raise invalid("truncate: expected a boolean")
    counts = await token_counts(texts)
    out = []
    for text, n in zip(texts, counts, strict=True):
        if n > shape.max_tokens:
            if not cut:
                raise invalid("the input length exceeds the context length")
            text = await truncated(text, shape.max_tokens)
        out.append(text)
    return out, sum(min(n, shape.max_tokens) for n in counts)


async def _embed(request: Request, legacy: bool) -> Response:
    started = time.monotonic_ns()
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    config = config_of(request)
    raw = await read_raw(request, config, any_content_type=True)
    body = body_object(parse_body(raw, unparsable="invalid JSON body: {error}"))
    sent = model_of(body)
    model = model_name(sent)
    shape = known(model) or SCENARIO_MODEL
    dimensions = _dimensions(body, shape)
    texts, tokens = await _fitted(_inputs(body, legacy), shape, body.get("truncate", True))
    attempts.fill_in(request, raw)
    turn = await embedding_turn(request, config, model, texts)
    if isinstance(turn, APIError):
        return error_response(turn)
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    attempts.settle(request)
    if not texts:  # Ollama answers an empty input with no vector (having loaded the model)
        return json_response({"embedding": []} if legacy else {"model": sent, "embeddings": []})

    def render(vectors: list[list[float]]) -> dict[str, Any]:
        if legacy:
            return {"embedding": vectors[0]}
        return {"model": sent, "embeddings": vectors, "total_duration": time.monotonic_ns() - started,
                "load_duration": 0, "prompt_eval_count": tokens}

    return await embedding_body([(text, dimensions) for text in texts], render)


def _endpoint(legacy: bool) -> Any:
    async def endpoint(request: Request) -> Response:
        try:
            return await _embed(request, legacy)
        except APIError as e:
            return error_response(e)
        except RecursionError:  # nested nearly to the parser's limit: parsed, then too deep to read
            return error_response(invalid("invalid JSON body: nested too deeply"))

    return endpoint


_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [
    route
    for prefix in ("", "/o/{options}")
    for route in (
        Route(f"{prefix}/api/embed", _endpoint(legacy=False), methods=_ANY),
        Route(f"{prefix}/api/embeddings", _endpoint(legacy=True), methods=_ANY),
    )
]
