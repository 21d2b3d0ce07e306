"""Gemini's embeddings, on the Gemini API and on Vertex AI, in Google's shape (`gemini.error_response`).

- Gemini API: `POST /v1beta/models/{model}:embedContent` (`{"content", "outputDimensionality"}` →
  `{"embedding": {"values"}}`) and `:batchEmbedContents` (`{"requests": [...]}`, at most 100, each
  naming the URL's model if it names one → `{"embeddings": [...]}`, where google-genai sends every
  `embed_content`); the same under `/v1/`.
- Vertex AI, under `/{v1,v1beta1}/projects/{project}/locations/{location}/publishers/google/models/{model}`:
  `:predict` (`{"instances": [{"content"}], "parameters": {"outputDimensionality", "autoTruncate"}}`,
  at most 250 instances → `{"predictions": [{"embeddings": {"values", "statistics"}}], "metadata"}`),
  where google-genai in Vertex mode sends a text-embedding model's request, and `:embedContent` and
  `:batchEmbedContents`, where it sends a model named `gemini…` (`embedContentConfig`, `usageMetadata`).

The model is a scenario (an embedding request is its turn 0: faults, latency, error replies) or a
real embedding model's name (`text-embedding-004`, `gemini-embedding-001`), whose length and token
limit it keeps; a scenario embeds as `text-embedding-004` does (768 numbers, 2048 tokens). An input
past the limit is cut to it (`autoTruncate`, default true, reported as `truncated`), or refused
with `autoTruncate: false`. Tokens are `o200k_base` tokens, as everywhere in the mock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockprovider.apis.gemini import PREFIXES, VERTEX, error_response
from mockprovider.apis.shared import embedding_body, embedding_turn, token_counts, truncated
from mockprovider.apis.steps import config_of, read_raw
from mockprovider.errors import APIError, invalid
from mockprovider.reading import attempts
from mockprovider.reading.validation import parse_body
from mockprovider.replies.embedding import KNOWN, EmbeddingModel, known

MAX_BATCH = 100
MAX_INSTANCES = 250
SCENARIO_MODEL = KNOWN["text-embedding-004"]
"""The shape a scenario's name embeds as."""


@dataclass(frozen=True, kw_only=True)
class Item:
    """One text to embed, with its own settings."""

    text: str
    dimensions: int | None = None
    auto_truncate: bool = True


@dataclass(frozen=True, kw_only=True)
class Embedded:
    values: list[float]
    tokens: int
    truncated: bool


def _object(value: Any, p: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"Invalid value at '{p}': expected an object.")
    return value


def _text(content: Any, p: str) -> str:
    """The text of a Content (its text parts joined), or of a plain string (Vertex's `predict`)."""
    if isinstance(content, str):
        return content
    parts = _object(content, p).get("parts")
    if not isinstance(parts, list) or not parts:
        raise invalid(f"* {p}.parts: contents must not be empty")
    texts = []
    for j, part in enumerate(parts):
        text = _object(part, f"{p}.parts[{j}]").get("text")
        if not isinstance(text, str):
            raise invalid(f"* {p}.parts[{j}]: only text parts are embedded here")
        texts.append(text)
    return "".join(texts)


def _settings(config: dict[str, Any], p: str) -> dict[str, Any]:
    """`outputDimensionality` and `autoTruncate`, checked."""
    out: dict[str, Any] = {}
    if (n := config.get("outputDimensionality")) is not None:
        if type(n) is not int or n < 1:
            raise invalid(f"* {p}.outputDimensionality: must be a positive integer, not {n!r}")
        out["dimensions"] = n
    if (cut := config.get("autoTruncate")) is not None:
        if not isinstance(cut, bool):
            raise invalid(f"* {p}.autoTruncate: must be a boolean, not {cut!r}")
        out["auto_truncate"] = cut
    return out


def _item(request: dict[str, Any], p: str, model: str, vertex: bool) -> Item:
    """An EmbedContentRequest (the Gemini API's, or Vertex's with its `embedContentConfig`)."""
    named = request.get("model")
    if named is not None and named != f"models/{model}" and not vertex:
        raise invalid(f"* {p}.model: {named!r} is not the model of the URL, 'models/{model}'")
    if "content" not in request:
        raise invalid(f"* {p}.content: contents must not be empty")
    settings = _settings(_object(request.get("embedContentConfig", {}), p), p) if vertex else {}
    return Item(text=_text(request["content"], f"{p}.content"), **_settings(request, p), **settings)


def _list(value: Any, p: str, most: int) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise invalid(f"* {p}: must not be empty")
    if len(value) > most:
        raise invalid(f"* {p}: at most {most} can be in one request, not {len(value)}")
    return value


def _items(method: str, body: Any, model: str, vertex: bool) -> list[Item]:
    body = _object(body, "request")
    if method == "embedContent":
        return [_item(body, "EmbedContentRequest", model, vertex)]
    if method == "batchEmbedContents":
        requests = _list(body.get("requests"), "BatchEmbedContentsRequest.requests", MAX_BATCH)
        p = "BatchEmbedContentsRequest.requests"
        return [_item(_object(r, f"{p}[{i}]"), f"{p}[{i}]", model, vertex) for i, r in enumerate(requests)]
    instances = _list(body.get("instances"), "PredictRequest.instances", MAX_INSTANCES)
    settings = _settings(_object(body.get("parameters", {}), "parameters"), "parameters")
    p = "PredictRequest.instances"
    return [Item(text=_text(_object(x, f"{p}[{i}]").get("content"), f"{p}[{i}].content"), **settings)
            for i, x in enumerate(instances)]


async def _fitted(items: list[Item], shape: EmbeddingModel) -> list[tuple[Item, int, bool]]:
    """Each item, cut to the model's token limit where it may be, its tokens, and whether it was cut."""
    out = []
    for i, (item, n) in enumerate(zip(items, await token_counts([x.text for x in items]), strict=True)):
        if item.dimensions is not None and shape.max_dimensions and item.dimensions > shape.max_dimensions:
            raise invalid(f"* outputDimensionality: at most {shape.max_dimensions} for this model, "
                          f"not {item.dimensions}")
        if n <= shape.max_tokens:
            out.append((item, n, False))
        elif not item.auto_truncate:
            raise invalid(f"Input {i} is longer than the maximum number of tokens allowed: {n} > "
                          f"{shape.max_tokens}. Set autoTruncate to cut it.")
        else:
            cut = await truncated(item.text, shape.max_tokens)
            out.append((Item(text=cut, dimensions=item.dimensions), shape.max_tokens, True))
    return out


def _render(method: str, vertex: bool, fitted: list[tuple[Item, int, bool]]) -> Callable[..., dict[str, Any]]:
    tokens = sum(n for _, n, _ in fitted)
    usage = {"promptTokenCount": tokens, "totalTokenCount": tokens}

    def render(vectors: list[list[float]]) -> dict[str, Any]:
        stats = [{"truncated": cut, "token_count": n} for _, n, cut in fitted]
        pairs = zip(vectors, stats, strict=True)
        if method == "predict":
            return {"predictions": [{"embeddings": {"values": v, "statistics": s}} for v, s in pairs],
                    "metadata": {"billableCharacterCount": sum(len(item.text) for item, _, _ in fitted)}}
        if method == "embedContent":
            out: dict[str, Any] = {"embedding": {"values": vectors[0]}}
            return {**out, "usageMetadata": usage, "truncated": fitted[0][2]} if vertex else out
        if vertex:
            return {"embeddings": [{"values": v, "statistics": s} for v, s in pairs],
                    "usageMetadata": usage}
        return {"embeddings": [{"values": v} for v in vectors]}

    return render


async def _embed(request: Request, method: str, vertex: bool) -> Response:
    config = config_of(request)
    raw = await read_raw(request, config)
    model = request.path_params["model"]
    body = parse_body(raw, unparsable="Invalid JSON payload received. {error}")
    items = _items(method, body, model, vertex)
    shape = known(model) or SCENARIO_MODEL
    fitted = await _fitted(items, shape)
    attempts.fill_in(request, raw)
    turn = await embedding_turn(request, config, model, [item.text for item, _, _ in fitted])
    if isinstance(turn, APIError):
        return error_response(turn)
    if isinstance(turn, bytes):
        return Response(turn, media_type="application/json")
    attempts.settle(request)
    pairs = [(item.text, item.dimensions or shape.dimensions) for item, _, _ in fitted]
    return await embedding_body(pairs, _render(method, vertex, fitted))


def _endpoint(method: str, *, vertex: bool) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        try:
            return await _embed(request, method, vertex)
        except APIError as e:
            return error_response(e)
        except RecursionError:  # nested nearly to the parser's limit: parsed, then too deep to read
            return error_response(invalid("Invalid JSON payload received: nested too deeply."))

    return endpoint


_POST = ["POST"]
ROUTES = [
    *(Route(f"{prefix}/{version}/models/{{model}}:{method}", _endpoint(method, vertex=False), methods=_POST)
      for prefix in PREFIXES for version in ("v1beta", "v1")
      for method in ("embedContent", "batchEmbedContents")),
    *(Route(f"{prefix}/{version}/{VERTEX}:{method}", _endpoint(method, vertex=True), methods=_POST)
      for prefix in PREFIXES for version in ("v1beta1", "v1")
      for method in ("predict", "embedContent", "batchEmbedContents")),
]
