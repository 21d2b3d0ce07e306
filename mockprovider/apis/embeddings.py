"""OpenAI's embeddings: `POST /v1/embeddings`, and Azure's behind its doors (`azure.py`).

`input` is a string, a list of strings, a list of token ids or a list of such lists (token ids of
`o200k_base`, decoded to the text they stand for); each gives the vector of its text
(`replies.embedding`), as a list of floats or, with `encoding_format: "base64"` (what the `openai`
client asks for by default, and decodes), little-endian float32 bytes in base64.
`usage.prompt_tokens` (and `total_tokens`, the same) counts every input's `o200k_base` tokens, a
token list's own length. The model is a scenario (an embedding request is turn 0 of it: its
faults, latency and error replies apply) or a real embedding model's name (`text-embedding-3-small`,
options allowed after it as anywhere), whose length (1536, 3072 for `-large`) and limits it keeps;
a scenario embeds as `text-embedding-3-small` does.

Refused as OpenAI refuses them, in its shape: an empty string or list, more than 2048 inputs,
an input of another type (`'$.input' is invalid…`), an input over the model's 8192 tokens, more
than 300,000 tokens in one request (`max_tokens_per_request`), `dimensions` below 1 or above the
model's length, or given to a model that takes none (`text-embedding-ada-002`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import o200k
from mockprovider.apis.shared import body_object, embedding_body, embedding_turn, model_of, token_counts
from mockprovider.apis.steps import config_of, read_json
from mockprovider.errors import APIError, invalid, missing
from mockprovider.replies.embedding import KNOWN, EmbeddingModel, known, to_base64

MAX_INPUTS = 2048
MAX_REQUEST_TOKENS = 300_000
SCENARIO_MODEL = KNOWN["text-embedding-3-small"]
"""The shape a scenario's name embeds as."""
_INVALID_INPUT = ("'$.input' is invalid. Please check the API reference: "
                  "https://platform.openai.com/docs/api-reference.")
_FORMATS = ("float", "base64")


def _token_ids(value: list[Any]) -> list[int]:
    if not value or len(value) > MAX_INPUTS or any(type(t) is not int for t in value):
        raise invalid(_INVALID_INPUT, param="input")
    n = o200k.encoding().n_vocab
    if any(not 0 <= t < n for t in value):
        raise invalid(f"Invalid token in 'input': every token id is from 0 to {n - 1}.", param="input")
    return value


def _inputs(value: Any) -> tuple[list[str], list[int] | None]:
    """The texts `input` stands for, and their token counts when it gives token ids."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > MAX_INPUTS:
        raise invalid(_INVALID_INPUT, param="input")
    if all(type(x) is str for x in value):
        if not all(value):
            raise invalid(_INVALID_INPUT, param="input")
        return value, None
    if all(type(x) is int for x in value):
        value = [value]
    if all(isinstance(x, list) for x in value):
        ids = [_token_ids(x) for x in value]
        decode = o200k.encoding().decode
        return [decode(x) for x in ids], [len(x) for x in ids]
    raise invalid(_INVALID_INPUT, param="input")


def _dimensions(body: dict[str, Any], shape: EmbeddingModel) -> int:
    asked = body.get("dimensions")
    if asked is None:
        return shape.dimensions
    if shape.max_dimensions is None:
        raise invalid("This model does not support specifying dimensions.", param="dimensions")
    if type(asked) is not int:
        raise invalid("Invalid type for 'dimensions': expected an integer.", param="dimensions",
                      code="invalid_type")
    if not 1 <= asked <= shape.max_dimensions:
        raise invalid(f"Invalid value for 'dimensions' = {asked}. Must be from 1 to {shape.max_dimensions}.",
                      param="dimensions", code="invalid_value")
    return asked


def _format(body: dict[str, Any]) -> str:
    chosen = body.get("encoding_format", "float")
    if chosen not in _FORMATS:
        raise invalid(f"{chosen!r} is not one of ['float', 'base64'] - 'encoding_format'",
                      param="encoding_format")
    return chosen


async def _counted(texts: list[str], counts: list[int] | None, shape: EmbeddingModel) -> int:
    """The request's prompt tokens, after the per-input and per-request limits."""
    counts = counts or await token_counts(texts)
    for n in counts:
        if n > shape.max_tokens:
            raise invalid(f"This model's maximum context length is {shape.max_tokens} tokens, however you "
                          f"requested {n} tokens ({n} in your prompt; 0 for the completion). Please reduce "
                          "your prompt; or completion length.")
    total = sum(counts)
    if total > MAX_REQUEST_TOKENS:
        raise APIError(400, f"Requested {total} tokens, max {MAX_REQUEST_TOKENS} tokens per request",
                       type="max_tokens_per_request", code="max_tokens_per_request")
    return total


async def answer(request: Request, deployment: str | None = None) -> Response:
    """The embeddings' reply, or OpenAI's error raised; `deployment` (Azure's routes) names the
    model instead of the body."""
    config = config_of(request)
    body = body_object(await read_json(request, config, whole_unicode=True))
    model = deployment if deployment is not None else model_of(body)
    if "input" not in body:
        raise missing("input")
    texts, counts = _inputs(body["input"])
    shape = known(model) or SCENARIO_MODEL
    dimensions, encoding = _dimensions(body, shape), _format(body)
    tokens = await _counted(texts, counts, shape)
    turn = await embedding_turn(request, config, model, texts)
    if isinstance(turn, APIError):
        return turn.response()
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")

    def render(vectors: list[list[float]]) -> dict[str, Any]:
        data = [{"object": "embedding", "index": i, "embedding": to_base64(v) if encoding == "base64" else v}
                for i, v in enumerate(vectors)]
        return {"object": "list", "data": data, "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    return await embedding_body([(text, dimensions) for text in texts], render)


async def create(request: Request) -> Response:
    return await answer(request)


ROUTES = [
    Route("/v1/embeddings", create, methods=["POST"]),
    Route("/o/{options}/v1/embeddings", create, methods=["POST"]),
]
