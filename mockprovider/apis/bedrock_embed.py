"""Amazon Titan text embeddings through Bedrock's `POST /model/{modelId}/invoke`, in AWS's shape.

boto3's `invoke_model(modelId=..., body=json.dumps({...}))` posts the model's own body:

- `amazon.titan-embed-text-v2:0`: `{"inputText", "dimensions" (256, 512 or 1024, default 1024),
  "normalize", "embeddingTypes" (["float"] and/or ["binary"])}` → `{"embedding", "inputTextTokenCount",
  "embeddingsByType"}`;
- `amazon.titan-embed-text-v1`: `{"inputText"}` → `{"embedding", "inputTextTokenCount"}` (1536 numbers).

The vector is the shared one (`replies/embedding.py`), the same as every other surface gives for
the same text at the same length; it is unit length whatever `normalize` says (Titan's own is
not when asked not to be). A `binary` embedding is each number's sign (1 above zero, else 0). The
model id may also name a scenario (an embedding request is its turn 0: faults, latency, error
replies), which embeds as Titan v2. `inputTextTokenCount` counts `o200k_base` tokens, and so do the
`X-Amzn-Bedrock-Input-Token-Count` header and the 8,192-token limit. Any other invoke body is
refused: this mock serves Bedrock's models through Converse.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.bedrock import endpoint, error_response, parse, scenario_of, sdk_attempt
from mockprovider.apis.shared import body_object, embedding_body, embedding_turn, string, token_counts
from mockprovider.apis.steps import config_of, read_raw
from mockprovider.errors import APIError, invalid
from mockprovider.reading import attempts
from mockprovider.reading.request_headers import header
from mockprovider.replies.embedding import KNOWN, known

V2 = "amazon.titan-embed-text-v2:0"
V2_DIMENSIONS = (256, 512, 1024)
V2_KEYS = frozenset({"inputText", "dimensions", "normalize", "embeddingTypes"})
TYPES = ("float", "binary")


def _v2_settings(body: dict[str, Any]) -> tuple[int, tuple[str, ...]]:
    """Titan v2's `dimensions` and `embeddingTypes`, refused in its words where it refuses them."""
    if extra := sorted(set(body) - V2_KEYS):
        raise invalid(f"Malformed input request: extraneous key [{extra[0]}] is not permitted, please "
                      "reformat your input and try again.")
    dimensions = body.get("dimensions", 1024)
    if type(dimensions) is not int or dimensions not in V2_DIMENSIONS:
        raise invalid(f"Malformed input request: #/dimensions: {dimensions!r} is not a valid enum value "
                      f"({', '.join(map(str, V2_DIMENSIONS))}), please reformat your input and try again.")
    if not isinstance(body.get("normalize", True), bool):
        raise invalid("Malformed input request: #/normalize: expected type: Boolean, please reformat your "
                      "input and try again.")
    kinds = body.get("embeddingTypes", ["float"])
    if not (isinstance(kinds, list) and kinds and all(isinstance(k, str) and k in TYPES for k in kinds)):
        raise invalid("Malformed input request: #/embeddingTypes: expected a non-empty array of 'float' "
                      "and 'binary', please reformat your input and try again.")
    return dimensions, tuple(dict.fromkeys(kinds))


def _settings(body: dict[str, Any], model: str) -> tuple[int, tuple[str, ...] | None]:
    """The vector's length, and the embedding types to send (None: v1, which sends none)."""
    shape = known(model)
    if shape is None or shape is KNOWN[V2]:  # a scenario embeds as Titan v2
        return _v2_settings(body)
    if shape is not KNOWN["amazon.titan-embed-text-v1"]:
        raise invalid(f"The model {model} is no Titan text embedding model; this mock's invoke serves "
                      f"{V2} and amazon.titan-embed-text-v1 (chat models answer through Converse).")
    if extra := sorted(set(body) - {"inputText"}):
        raise invalid(f"Malformed input request: extraneous key [{extra[0]}] is not permitted, please "
                      "reformat your input and try again.")
    return shape.dimensions, None


async def _invoke(request: Request) -> Response:
    started = time.perf_counter()
    if request.method != "POST":
        raise APIError(405, f"{request.method} {request.url.path}: use POST.", headers={"allow": "POST"})
    config = config_of(request)
    # boto3's invoke_model sends no content type unless given one; Bedrock reads JSON either way.
    raw = await read_raw(request, config, any_content_type=True)
    media = (header(request, b"content-type") or "application/json").partition(";")[0].strip().lower()
    if media != "application/json":
        raise invalid(f"The content type {media!r} is not supported; the model takes application/json.")
    body = body_object(parse(raw))
    model = scenario_of(request.path_params["model_id"], config.scenarios)
    text = string(body.get("inputText"), "inputText")
    if not text:
        raise invalid("Malformed input request: #/inputText: expected minLength: 1, actual: 0, please "
                      "reformat your input and try again.")
    dimensions, kinds = _settings(body, model.partition("+")[0])
    (tokens,) = await token_counts([text])
    if tokens > KNOWN[V2].max_tokens:
        raise invalid(f"400 Bad Request: Too many input tokens. Max input tokens: {KNOWN[V2].max_tokens}, "
                      f"request input token count: {tokens}")
    sdk_attempt(request, raw)
    turn = await embedding_turn(request, config, model, [text])
    if isinstance(turn, APIError):
        return error_response(turn, request)
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    attempts.settle(request)

    def render(vectors: list[list[float]]) -> dict[str, Any]:
        (values,) = vectors
        out: dict[str, Any] = {"embedding": values, "inputTextTokenCount": tokens}
        if kinds is not None:
            binary = [1 if x > 0 else 0 for x in values]
            out["embeddingsByType"] = {kind: values if kind == "float" else binary for kind in kinds}
        return out

    response = await embedding_body([(text, dimensions)], render)
    response.headers["x-amzn-bedrock-input-token-count"] = str(tokens)
    response.headers["x-amzn-bedrock-invocation-latency"] = str(int((time.perf_counter() - started) * 1000))
    return response


invoke = endpoint(_invoke)

# Ahead of bedrock.ROUTES, whose `/model/{rest:path}` answers every other path under /model/.
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ROUTES = [Route(f"{prefix}/model/{{model_id:path}}/invoke", invoke, methods=_ANY)
          for prefix in ("", "/o/{options}")]
