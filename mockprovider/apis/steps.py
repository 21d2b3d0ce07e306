"""The steps every wire format shares, from bytes to a scripted reply.

auth → body read under a size cap → (JSON) → options (server defaults, scenario file, base-URL
prefix, model suffix, header) → scenario lookup → (latency and faults: `replies.faults`) → the
scenario's reply, held to what the request allows. Every surface in `apis/` calls these; none
of them imports another's module.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mockprovider.errors import APIError, ScriptedError
from mockprovider.journal import Journal
from mockprovider.metrics import SCENARIO
from mockprovider.reading.body import authorize, read_json, read_raw
from mockprovider.reading.request_headers import HEADERS, header, header_map, test_id
from mockprovider.replies import embedding, tool_choice
from mockprovider.replies.faults import wait_unless_gone
from mockprovider.replies.headers import OPTIONS
from mockprovider.replies.tool_choice import AUTO, ToolChoice
from mockprovider.scripts import scenarios
from mockprovider.scripts.options import SYNTAX, Options, apply
from mockprovider.scripts.scenarios import Conversation, Reply, Scenario

log = logging.getLogger("mockprovider")


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
    # The state's own dict: an attribute of `State` is first looked up, and missed with an
    # AttributeError formatted and caught, before its `__getattr__` reads that dict (results/bench.md,
    # speed tricks: "app state read from its dict").
    state = request.app.state._state
    tests = state.get("tests")
    if tests and (config := tests.get(test_id(request))) is not None:
        return config
    return state["config"]


__all__ = ["Config", "api_error", "authorize", "client_gone", "config_of", "listing_options", "read_json",
           "held", "read_raw", "resolve", "scripted_reply"]
"""`authorize`, `read_raw` and `read_json` are `reading.body`'s, the first step of every surface."""


def _chosen(*texts: str | None) -> str | None:
    """The `scenario=NAME` item of the last options string that has one, if any."""
    name = None
    for text in texts:
        if text and "scenario=" in text:
            for item in text.split("+"):
                if item.startswith("scenario="):
                    name = item.removeprefix("scenario=")
    return name


def resolve(request: Request, config: Config, model: str, *,
            embedding_model: bool = False) -> tuple[Scenario, Options]:
    """The scenario a model name (or a `scenario=NAME` option in the base-URL path or the
    header, whatever the model says) selects, and the options in force for this request.
    `embedding_model`: a real embedding model's name (`text-embedding-3-small`) that names no
    scenario selects none (`resolve_embedding`).

    Later sources override earlier ones: server defaults < the scenario file's `options` <
    base-URL path < model suffix < header.
    """
    name, _, suffix = model.partition("+")
    # The headers were read with the body (`reading.body`): looked up here, not read again.
    sent = (request.scope.get(HEADERS) or header_map(request)).get(b"x-mock-options")
    path, sent = request.path_params.get("options", ""), None if sent is None else sent.decode("latin-1")
    if path or sent:
        name = _chosen(path, sent) or name
    script = config.scenarios.get(name)
    if script is None and not (embedding_model and embedding.known(name) is not None):
        known = ", ".join(config.scenarios)
        raise APIError(
            404,
            f"The model {name!r} does not exist; known scenarios: {known}. {SYNTAX}.",
            param="model",
            code="model_not_found",
        )
    request.scope[SCENARIO] = name
    scripted = getattr(script, "options", "")  # a file scenario's, checked when it was loaded
    if not (scripted or path or suffix or sent):  # most requests: the server's defaults
        request.scope[OPTIONS] = config.defaults
        return script, config.defaults
    options = _stated(request, config.defaults, (
        (scripted, "model"),
        (path, "base_url"),
        (suffix, "model"),
        (sent, "x-mock-options"),
    ))
    return script, options


def resolve_embedding(request: Request, config: Config, model: str) -> tuple[Scenario | None, Options]:
    """`resolve`, for an embedding request: a real embedding model's name that names no scenario
    (`text-embedding-3-small`) selects no scenario, only the options."""
    return resolve(request, config, model, embedding_model=True)


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


def _raise_scripted(e: Any) -> None:
    # A fresh exception per request: re-raising one shared instance would grow its traceback.
    given = e.type if getattr(e, "given_type", True) else None
    raise ScriptedError(e.status, e.message, type=given, code=e.code, headers=dict(e.headers))


async def scripted(request: Request, script: Scenario, conversation: Conversation) -> Reply:
    """The scenario's reply to `conversation`, after the reply's own latency; a scripted error
    reply is raised, for the wire format to render (as `scripted_reply`, without tools)."""
    reply = script(conversation)
    if reply.latency_ms:
        await wait_unless_gone(request, reply.latency_ms / 1000)
    if reply.error is not None:
        _raise_scripted(reply.error)
    return reply


async def scripted_reply(
    request: Request, script: Scenario, conversation: Conversation,
    tools: Sequence[Mapping[str, Any]] | None, options: Options, choice: ToolChoice = AUTO,
) -> tuple[Reply, Options]:
    """The scenario's reply to `conversation` and the options it streams under, after the
    reply's own latency; a scripted error reply is raised, for the wire format to render. The
    reply is one a real model could give under the request's tools and `choice` (see
    `tool_choice.constrain`). `conversation` carries the same `tools` (built with them)."""
    reply = script(conversation)  # `scripted`'s steps written in: one coroutine fewer per request
    if reply.latency_ms:
        await wait_unless_gone(request, reply.latency_ms / 1000)
    return held(reply, script, conversation.turn, tools, options, choice)


def held(reply: Reply, script: Scenario, turn: int, tools: Sequence[Mapping[str, Any]] | None,
         options: Options, choice: ToolChoice = AUTO) -> tuple[Reply, Options]:
    """`scripted_reply` after the reply's own latency: a scripted error raised, the reply held
    to `tools` and `choice`, and the options it streams under."""
    if reply.error is not None:
        _raise_scripted(reply.error)
    # `constrain` can change or refuse nothing for an agent loop's usual request (tools offered,
    # `tool_choice` auto, undeclared tools allowed): tested inline, the chat route's hot path.
    if not tools or choice.mode != "auto" or options.refuse_undeclared or choice.allowed:
        reply = tool_choice.constrain(
            reply, script=script, turn=turn, choice=choice, tools=tools,
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
