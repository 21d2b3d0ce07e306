"""What the Responses, Messages, Gemini and Ollama wire formats share with the chat route.

Each format translates its request into the chat shape the scenarios and the o200k formula
already read (`ChatShaped`: messages with roles, tool_calls and tool_call_ids; tools as chat
function definitions), refusing in its own words what its API refuses. `scripted_turn` then
runs the chat route's own steps on it: options, scenario, the chat route's transcript reader
(`transcript.read`: the checks, the turn, the tool text and the count, a large count on a
worker thread), latency, fault, reply, cut. So one scenario is the same script, turn by turn,
in every format, and token counts are the chat formula over the same conversation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

import o200k
from mockprovider.apis.steps import Config, resolve, resolve_embedding, scripted, scripted_reply
from mockprovider.errors import APIError, invalid, missing
from mockprovider.offload import off_the_loop_if_large
from mockprovider.reading import transcript
from mockprovider.replies import caching, completions, embedding, midstream
from mockprovider.replies.caching import prompt_cache
from mockprovider.replies.faults import delay_or_fault, injected
from mockprovider.replies.tool_choice import AUTO, ToolChoice
from mockprovider.scripts.options import Fault, Options


@dataclass(frozen=True, kw_only=True)
class ChatShaped:
    """A request of another wire format, in the chat shape the shared steps understand."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int | None
    stream: bool
    cache_breakpoints: tuple[caching.Breakpoint, ...] | None = None
    """Anthropic's explicit `cache_control` marks; None: OpenAI's automatic caching."""
    tool_choice: ToolChoice = AUTO
    paired: bool = False
    """The format matched each result to its call by its own, looser rules (`transcript.read`)."""


@dataclass(frozen=True, kw_only=True)
class Turn:
    """The scripted reply, cut and counted, and the options it was produced under."""

    completion: completions.Completion
    options: Options
    cut: Fault | None = None
    """A fault the reply itself carries (`midstream`): an error event or a dropped connection."""


async def scripted_turn(
    request: Request, config: Config, req: ChatShaped, *, midstream_faults: bool = False
) -> Turn | APIError | bytes:
    """The chat route's steps on a translated request: a reply, or what a fault answers instead.

    `midstream_faults`: the format renders `Turn.cut` (`streamed`, `as_json`); a format that does
    not gets those faults as an error reply or a broken body instead, never silently dropped."""
    script, options = resolve(request, config, req.model)
    t = transcript.read(req.messages, paired=req.paired)
    fault = await delay_or_fault(request, req.model, t.turn, options)
    cut = fault if midstream_faults and midstream.applies(fault, req.stream) else None
    if fault is not None and cut is None:
        return await injected(request, fault, options)
    conversation, prompt_tokens = await transcript.counted(t, req.tools)
    reply, options = await scripted_reply(request, script, conversation, req.tools, options, req.tool_choice)
    cache = await prompt_cache(req.messages, req.tools, req.cache_breakpoints, prompt_tokens, t.turn, options)
    completion = completions.complete(
        reply,
        model=req.model,
        prompt_tokens=prompt_tokens,
        max_tokens=req.max_tokens,
        cache=cache,
    )
    return Turn(completion=completion, options=options, cut=cut)


async def embedding_turn(
    request: Request, config: Config, model: str, texts: Sequence[str]
) -> Options | APIError | bytes:
    """An embedding request as turn 0 of its scenario, the options in force, or what a fault
    answers instead: the options' latency and fault, then, when the model names a scenario (not
    a real embedding model's name), the scenario's reply to the texts as one user message: its
    latency waited, its error reply raised; what it says otherwise is no embedding's business."""
    script, options = resolve_embedding(request, config, model)
    fault = await delay_or_fault(request, model, 0, options)
    if fault is not None:
        return await injected(request, fault, options)
    if script is not None:
        messages = [{"role": "user", "content": "\n".join(texts)}]
        await scripted(request, script, transcript.conversation(messages))
    return options


async def token_counts(texts: Sequence[str]) -> list[int]:
    """Each text's `o200k_base` tokens (a large total on a worker thread)."""
    return await off_the_loop_if_large(sum(map(len, texts)), lambda: [o200k.count(t) for t in texts])


async def truncated(text: str, limit: int) -> str:
    """`text` cut to its first `limit` `o200k_base` tokens, as a model that truncates its input cuts it."""
    enc = o200k.encoding()
    return await off_the_loop_if_large(len(text), lambda: enc.decode(enc.encode_ordinary(text)[:limit]))


async def embedding_body(
    items: Sequence[tuple[str, int]], render: Callable[[list[list[float]]], dict[str, Any]]
) -> Response:
    """The JSON reply `render` makes of the vectors of (text, dimensions) pairs (`replies.embedding`);
    many or long texts are embedded and written out on a worker thread, so others get answers meanwhile."""
    def work() -> bytes:
        return _dumps_in_pieces(render([embedding.vector(text, n) for text, n in items])).encode()

    body = await off_the_loop_if_large(sum(len(text) + n for text, n in items), work)
    return Response(body, media_type="application/json")


def suffix(completion: completions.Completion) -> str:
    """The random part of the completion's id, reused for every id a format derives from it."""
    return completion.id.rpartition("-")[2]


# --- request fields every format checks the same way -----------------------------------------


def body_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid("Invalid request body: expected a JSON object.")
    return body


def model_of(body: dict[str, Any]) -> str:
    model = body.get("model")
    if model is None:
        raise missing("model")
    if not isinstance(model, str) or not model:
        raise invalid("Invalid 'model': expected a non-empty string.", param="model")
    return model


def string(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"Invalid type for '{param}': expected a string.", param=param)
    return value


def chat_tool(
    name: Any, description: Any, parameters: Any, param: str, *, strict: Any = None
) -> dict[str, Any]:
    """A tool definition as a chat client would send it, so the formula counts it the same."""
    function: dict[str, Any] = {"name": string(name, f"{param}.name")}
    if description is not None:
        function["description"] = string(description, f"{param}.description")
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise invalid(f"Invalid type for '{param}.parameters': expected an object.",
                          param=f"{param}.parameters", code="invalid_type")
        function["parameters"] = parameters
    if strict is not None:
        if not isinstance(strict, bool):
            raise invalid(f"Invalid type for '{param}.strict': expected a boolean.", param=f"{param}.strict")
        function["strict"] = strict
    return {"type": "function", "function": function}


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- what Anthropic's and Bedrock's replies share ---------------------------------------------


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's input object; `{}` when a `max_tokens` cut left its JSON unfinished (or the
    script's arguments are no object)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def streamed_input(arguments: str) -> str:
    """The JSON a stream's input deltas carry: the arguments when they are an object, else `{}`, the
    input `tool_input` gives (a client parses every delta as the prefix of an object)."""
    return arguments if tool_input(arguments) else "{}"


def reasoning_signature(text: str) -> str:
    """An opaque signature for a reasoning block, as the APIs attach one (the SDKs keep it)."""
    return base64.b64encode(hashlib.sha256(f"mockprovider:{text}".encode()).digest()).decode()


# --- rendering -----------------------------------------------------------------------------


def _dumps(data: Any) -> str:
    # ASCII-escaped: a body may echo the client's own strings, lone surrogates included, which
    # UTF-8 cannot encode (Starlette's JSONResponse would fail on them with a 500).
    return json.dumps(data, separators=(",", ":"))


def _dumps_in_pieces(value: Any) -> str:
    """`_dumps(value)`, each object's members and each array of objects or arrays written by a
    call of its own: one call holds the GIL throughout, so a worker thread writing a large body
    in one would stop the event loop until it is done."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dumps(k)}:{_dumps_in_pieces(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list) and value and isinstance(value[0], dict | list):
        return "[" + ",".join(map(_dumps_in_pieces, value)) + "]"
    return _dumps(value)


def streamed(
    turn: Turn, events: Iterable[tuple[bytes, int]], error: midstream.ErrorEvent,
    media_type: str = "text/event-stream",
) -> Response:
    """The turn's streamed reply (SSE unless `media_type` says otherwise); `error` is the format's
    mid-stream error event, sent if the turn carries a `stream_error` fault."""
    if turn.cut is None:
        return event_stream(events, turn.options, media_type)
    return midstream.stream(_paced(events, turn.options), turn.cut, error, media_type)


def as_json(turn: Turn, data: dict[str, Any]) -> Response:
    """The turn's JSON reply (cut halfway if the turn carries a `drop` fault)."""
    if turn.cut is None:
        return json_response(data)
    return midstream.dropped_body(_dumps(data).encode(), turn.cut)


def json_response(
    data: dict[str, Any], *, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(_dumps(data), status_code=status, headers=headers, media_type="application/json")


def sse_event(name: str, data: dict[str, Any]) -> bytes:
    """One named server-sent event, as both the Responses and the Messages APIs send them."""
    return f"event: {name}\ndata: {_dumps(data)}\n\n".encode()


async def _paced(events: Iterable[tuple[bytes, int]], options: Options) -> AsyncIterator[bytes]:
    delay = 1 / options.rate_tps if options.rate_tps else 0.0
    for data, tokens in events:
        yield data
        if delay and tokens:
            await asyncio.sleep(delay * tokens)


def event_stream(
    events: Iterable[tuple[bytes, int]], options: Options, media_type: str = "text/event-stream"
) -> StreamingResponse:
    """A streamed response (SSE unless `media_type` says otherwise) from (event bytes, tokens it
    carries) pairs, paced by the `rate` option."""
    return StreamingResponse(
        _paced(events, options), media_type=media_type, headers={"cache-control": "no-cache"}
    )
