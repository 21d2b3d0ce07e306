"""The steps every wire format shares, from bytes to a scripted reply.

auth → body read under a size cap → (JSON) → options (server defaults, scenario file, base-URL
prefix, model suffix, header) → scenario lookup → (latency and faults: `replies.faults`) → the
scenario's reply, held to what the request allows. Every surface in `apis/` calls these; none
of them imports another's module.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mockprovider.errors import APIError, ClientGone, ScriptedError
from mockprovider.journal import Journal, headers_of
from mockprovider.metrics import SCENARIO
from mockprovider.reading import attempts
from mockprovider.reading.request_headers import header, header_map, test_id
from mockprovider.reading.validation import parse_body, refuse_lone_surrogates
from mockprovider.replies import embedding, tool_choice
from mockprovider.replies.faults import wait_unless_gone
from mockprovider.replies.headers import OPTIONS
from mockprovider.replies.tool_choice import AUTO, ToolChoice
from mockprovider.scripts import scenarios
from mockprovider.scripts.options import SYNTAX, Options, apply
from mockprovider.scripts.scenarios import Conversation, Reply, Scenario

log = logging.getLogger("mockprovider")

SIGV4 = "AWS4-HMAC-SHA256 "


@dataclass(frozen=True, kw_only=True)
class Config:
    """One server's settings; per-request options override `defaults`."""

    defaults: Options = field(default_factory=Options)
    api_key: str | None = field(default=None, repr=False)
    """When set, /v1/* requires `Authorization: Bearer <api_key>`; never in a repr."""
    max_body_bytes: int = 1_000_000
    scenarios: Mapping[str, Scenario] = field(default_factory=lambda: dict(scenarios.SCENARIOS))
    """Every model name this server answers to: the built-ins and any scenario files."""
    journal: Journal | None = None
    """When set, every request body read is recorded (observed only, never read by a scenario)."""
    mcp: Any = None
    """The MCP server's settings beside the scenario files' scripts (a `mockprovider.mcp.McpOptions`:
    tools given in code, the effects ledger, the page size), set by `create_app`; the MCP server is
    mounted above the surfaces, so this folder names no type of it."""


def config_of(request: Request) -> Config:
    """The server's settings; on a shared mock, those set up for this request's test, if any
    (`MockLLM.configure` on `mock_llm_shared`, keyed by `x-test-id`)."""
    state = request.app.state
    tests = getattr(state, "tests", None)
    if tests and (config := tests.get(test_id(request))) is not None:
        return config
    return state.config


# --- the steps every wire format shares ----------------------------------------------------


def authorize(request: Request, config: Config) -> None:
    if config.api_key is None:
        return
    # Anthropic's clients send the key as x-api-key, Azure's as api-key, Google's as
    # x-goog-api-key or ?key=; AWS's SDKs sign with it (SigV4, its access key id the key: the
    # signature is not verified); every other client as a bearer token.
    key = (header(request, b"x-api-key") or header(request, b"api-key") or header(request, b"x-goog-api-key")
           or request.query_params.get("key"))
    given = f"Bearer {key}" if key is not None else header(request, b"authorization") or ""
    if given.startswith(SIGV4):
        given = "Bearer " + given.partition("Credential=")[2].partition("/")[0]
    if not given:
        raise APIError(
            401,
            "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY' "
            "(or 'x-api-key: YOUR_KEY').",
            code="missing_api_key",
        )
    if not hmac.compare_digest(given.encode(), f"Bearer {config.api_key}".encode()):
        raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")


def _check_content_type(headers: Mapping[bytes, bytes]) -> None:
    value = headers.get(b"content-type", b"")
    if value == b"application/json":  # as every client we know sends it
        return
    media = value.decode("latin-1").split(";")[0].strip().lower()
    if media != "application/json":
        raise APIError(
            415,
            f"Unsupported content type {media or '(none)'!r}; send 'application/json'.",
            code="unsupported_media_type",
        )


def _too_large(limit: int) -> APIError:
    return APIError(413, f"Request body is larger than the limit of {limit} bytes.", code="request_too_large")


async def _read_body(request: Request, declared: bytes, limit: int) -> bytes:
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    # ASGI messages read directly, without Request.stream()'s async generator: a short body
    # comes in one message and is returned as it is.
    chunks, size, more = [], 0, True
    while more:
        message = await request.receive()
        if message["type"] != "http.request":  # http.disconnect: nobody is left to answer
            raise ClientGone
        chunk, more = message.get("body", b""), message.get("more_body", False)
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        if not (more or chunks):
            return chunk  # the whole body in one message, as a short request comes
        chunks.append(chunk)
    return b"".join(chunks)


async def read_raw(request: Request, config: Config, *, any_content_type: bool = False) -> bytes:
    """The request's body, after auth, content type (unless `any_content_type`) and the size cap."""
    authorize(request, config)
    headers = header_map(request)
    if not any_content_type:
        _check_content_type(headers)
    raw = await _read_body(request, headers.get(b"content-length", b""), config.max_body_bytes)
    attempts.keep_body(request, raw)
    tested = test_id(request)  # a malformed one is refused whatever else is on
    if config.journal is not None:
        headers = headers_of(request.headers.items())
        config.journal.record_raw(method=request.method, path=request.url.path, headers=headers, raw=raw,
                                  test_id=tested)
    return raw


async def read_json(request: Request, config: Config, *, whole_unicode: bool = False) -> Any:
    """The request's JSON body, after auth, content type, the size cap and the depth bound;
    `whole_unicode`: refused if a string holds a lone surrogate, as OpenAI and Anthropic refuse it."""
    raw = await read_raw(request, config)
    body = parse_body(raw)
    if whole_unicode:
        refuse_lone_surrogates(raw, body)
    return body


def _chosen(*texts: str | None) -> str | None:
    """The `scenario=NAME` item of the last options string that has one, if any."""
    name = None
    for text in texts:
        if text and "scenario=" in text:
            for item in text.split("+"):
                if item.startswith("scenario="):
                    name = item.removeprefix("scenario=")
    return name


def resolve(request: Request, config: Config, model: str) -> tuple[Scenario, Options]:
    """The scenario a model name (or a `scenario=NAME` option in the base-URL path or the
    header, whatever the model says) selects, and the options in force for this request.

    Later sources override earlier ones: server defaults < the scenario file's `options` <
    base-URL path < model suffix < header.
    """
    name, script, options = _resolve(request, config, model)
    if script is None:
        known = ", ".join(config.scenarios)
        raise APIError(
            404,
            f"The model {name!r} does not exist; known scenarios: {known}. {SYNTAX}.",
            param="model",
            code="model_not_found",
        )
    request.scope[SCENARIO] = name
    return script, options


def resolve_embedding(request: Request, config: Config, model: str) -> tuple[Scenario | None, Options]:
    """`resolve`, for an embedding request: a real embedding model's name that names no scenario
    (`text-embedding-3-small`) selects no scenario, only the options."""
    name, script, options = _resolve(request, config, model)
    if script is None and embedding.known(name) is None:
        return resolve(request, config, model)  # raises the unknown model's 404
    request.scope[SCENARIO] = name
    return script, options


def _resolve(request: Request, config: Config, model: str) -> tuple[str, Scenario | None, Options]:
    """The name `resolve` looks up, its scenario (None: no scenario has that name) and the options
    (those of the base URL, the model suffix and the header, too, for a name of no scenario)."""
    name, _, suffix = model.partition("+")
    path, sent = request.path_params.get("options", ""), header(request, b"x-mock-options")
    if path or sent:
        name = _chosen(path, sent) or name
    script = config.scenarios.get(name)
    if script is None and embedding.known(name) is None:
        return name, None, config.defaults
    options = _stated(request, config.defaults, (
        (getattr(script, "options", ""), "model"),  # a file scenario's, checked when it was loaded
        (path, "base_url"),
        (suffix, "model"),
        (sent, "x-mock-options"),
    ))
    return name, script, options


def listing_options(request: Request, config: Config) -> None:
    """State, for a request that names no model (a listing), the options of its base-URL prefix
    and its header: its reply's rate-limit headers carry them, as a model's request's do."""
    _stated(request, config.defaults, ((request.path_params.get("options", ""), "base_url"),
                                       (header(request, b"x-mock-options"), "x-mock-options")))


def _stated(request: Request, options: Options, sources: tuple[tuple[str, str], ...]) -> Options:
    """`options` with each source's (text, parameter) applied over the ones before, kept in the
    scope: the reply's rate-limit headers state them. Most requests set none at all."""
    for text, param in sources:
        if text:
            options = apply(options, text, param=param)
    request.scope[OPTIONS] = options
    return options


async def scripted(request: Request, script: Scenario, conversation: Conversation) -> Reply:
    """The scenario's reply to `conversation`, after the reply's own latency; a scripted error
    reply is raised, for the wire format to render."""
    reply = script(conversation)
    if reply.latency_ms:
        await wait_unless_gone(request, reply.latency_ms / 1000)
    if (e := reply.error) is not None:
        # A fresh exception per request: re-raising one shared instance would grow its traceback.
        given = e.type if getattr(e, "given_type", True) else None
        raise ScriptedError(e.status, e.message, type=given, code=e.code, headers=dict(e.headers))
    return reply


async def scripted_reply(
    request: Request, script: Scenario, conversation: Conversation,
    tools: Sequence[Mapping[str, Any]] | None, options: Options, choice: ToolChoice = AUTO,
) -> tuple[Reply, Options]:
    """The scenario's reply to `conversation` and the options it streams under, after the
    reply's own latency; a scripted error reply is raised, for the wire format to render. The
    reply is one a real model could give under the request's tools and `choice` (see
    `tool_choice.constrain`). `conversation` carries the same `tools` (built with them)."""
    reply = await scripted(request, script, conversation)
    # `constrain` can change or refuse nothing for an agent loop's usual request (tools offered,
    # `tool_choice` auto, undeclared tools allowed): tested inline, the chat route's hot path.
    if not tools or choice.mode != "auto" or options.refuse_undeclared or choice.allowed:
        reply = tool_choice.constrain(
            reply, script=script, turn=conversation.turn, choice=choice, tools=tools,
            refuse_undeclared=options.refuse_undeclared,
        )
    if reply.rate_tps is not None:
        options = replace(options, rate_tps=reply.rate_tps)
    if options.chunk and reply.chunk == 1:  # the request's chunk, unless the reply sets its own
        reply = replace(reply, chunk=options.chunk)
    if reply.usage is not None and options.usage != "recorded":
        reply = replace(reply, usage=None)
    return reply, options




async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return exc.response()


async def client_gone(request: Request, exc: Exception) -> Response:
    log.info("%s %s: the client left while its request waited; dropped", request.method, request.url.path)
    return Response(status_code=499)  # nobody reads it; uvicorn discards a reply to a closed socket
