"""OpenAI Chat Completions bodies and SSE chunks, built from a scripted `Reply`.

A reply becomes a `Completion`: the message cut to `max_tokens` (text and tool-call
arguments alike, as a real API cuts them), its finish reason, and its token counts. Both the
JSON body and the SSE stream are rendered from the same `Completion`, so streamed usage
always equals non-streamed usage.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from operator import attrgetter
from random import getrandbits
from typing import Any, Literal, NamedTuple

import o200k
from mockprovider.replies import caching
from mockprovider.replies.caching import NO_CACHE, Cache
from mockprovider.scripts.scenarios import Reply, ToolCall

FinishReason = Literal["stop", "tool_calls", "length"]
_UNLIMITED = 1 << 62


class Completion(NamedTuple):
    """A reply as every wire format renders it. A NamedTuple, not a frozen dataclass, as are the
    other records built for every request (`ChatRequest`, `Transcript`): as immutable, and
    cheaper to build and read (results/bench.md, speed tricks: "Completion a NamedTuple")."""

    id: str
    created: int
    model: str
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    chunk: int = 1
    """Tokens per streamed delta."""
    cache: Cache = NO_CACHE
    """What the prompt read from and wrote to the provider's cache (part of `prompt_tokens`)."""
    reasoning: str | None = None
    """The reasoning text, when the reply's reasoning was given as text (cut as the reply is)."""
    reasoning_tokens: int = 0
    """The part of `completion_tokens` spent reasoning."""

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cache.read, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


def token_pieces(text: str) -> list[str]:
    """`text` split at token boundaries, merging tokens that end inside a UTF-8 character."""
    enc = o200k.encoding()
    pieces, buf = [], b""
    for tok in enc.encode(text, disallowed_special=()):
        buf += enc.decode_single_token_bytes(tok)
        try:
            pieces.append(buf.decode("utf-8"))
            buf = b""
        except UnicodeDecodeError:
            continue
    if buf:
        pieces.append(buf.decode("utf-8", errors="replace"))
    return pieces


def deltas(text: str, chunk: int = 1) -> list[str]:
    """`text` as a stream's deltas: `chunk` tokens each (the last may hold fewer)."""
    return [piece for piece, _ in weighed_deltas(text, chunk)]


def object_calls(c: Completion) -> list[tuple[ToolCall, dict[str, Any]]]:
    """The reply's calls with their arguments as an object, for the formats whose arguments are
    one (Gemini, Ollama). A call whose arguments a cut left unfinished cannot be sent in part:
    sent as `{}`, a client that runs calls whatever the finish reason would run it with arguments
    it never had, so it is left out. Arguments that are whole but not an object are sent as `{}`."""
    out = []
    for call in c.tool_calls:
        try:
            value = json.loads(call.arguments)
        except ValueError:
            value = None
        if not isinstance(value, dict) and c.finish_reason == "length":
            continue
        out.append((call, value if isinstance(value, dict) else {}))
    return out


def arguments_tokens(c: Completion) -> int:
    """The tokens of every tool call's arguments: what a stream sending them at once waits for."""
    return sum(len(token_pieces(call.arguments)) for call in c.tool_calls)


def weighed_deltas(text: str, chunk: int = 1) -> list[tuple[str, int]]:
    """`deltas(text, chunk)`, each with the tokens it holds: what a paced stream waits for after
    it (a short last delta, or a reply shorter than `chunk`, waits only for its own tokens)."""
    pieces = token_pieces(text)
    step = max(chunk, 1)
    return [("".join(pieces[i:i + step]), len(pieces[i:i + step])) for i in range(0, len(pieces), step)]


def _cut(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` tokens of `text` and how many tokens that is."""
    enc = o200k.encoding()
    ids = enc.encode(text, disallowed_special=())
    return enc.decode(ids[:limit]), min(limit, len(ids))


_FIELDS = attrgetter("id", "name", "arguments")


def _calls_tokens(calls: tuple[ToolCall, ...]) -> int:
    return o200k.call_fields_tokens(tuple(map(_FIELDS, calls)))


CALLS_KEPT = 256
_CALLS_COUNTED: dict[int, tuple[tuple[ToolCall, ...], int]] = {}
"""id of a reply's calls -> (the calls, their tokens); the calls held, so their id is not reused."""


def _cut_calls(calls: tuple[ToolCall, ...], limit: int) -> tuple[ToolCall, ...]:
    """The longest prefix of `calls` whose wire JSON fits in `limit` tokens; the last call kept
    may have its arguments cut at a token boundary (a real API cuts mid-argument too)."""
    kept: list[ToolCall] = []
    for call in calls:
        if _calls_tokens((*kept, call)) <= limit:
            kept.append(call)
            continue
        enc = o200k.encoding()
        ids = enc.encode(call.arguments, disallowed_special=())
        low, high, best = 0, len(ids) - 1, None
        while low <= high:  # the most argument tokens that still fit
            mid = (low + high) // 2
            trial = replace(call, arguments=enc.decode(ids[:mid]))
            if _calls_tokens((*kept, trial)) <= limit:
                best, low = trial, mid + 1
            else:
                high = mid - 1
        if best is not None:
            kept.append(best)
        break
    return tuple(kept)


def complete(
    reply: Reply, *, model: str, prompt_tokens: int, max_tokens: int | None, cache: Cache = NO_CACHE
) -> Completion:
    """Render `reply`, cut at `max_tokens` completion tokens if it is longer.

    A cut reply bills exactly `max_tokens`, as a real provider does; what it shows is the part
    that fits (for tool calls: the calls whose wire JSON fits, the last one's arguments cut). A
    reply with text and tool calls spends the budget on the text first, as it is generated first.
    Reasoning comes before both and counts against `max_tokens`, as OpenAI's and Anthropic's do.
    A recorded `usage` on the reply (kept only when the request asked for it) replaces the counts
    of a reply that was not cut.
    """
    budget = max_tokens if max_tokens is not None else _UNLIMITED
    thought, thought_tokens, thought_cut = (None, 0, False) if reply.reasoning is None else _reasoning(
        reply.reasoning, budget)
    if thought_cut or (thought_tokens >= budget and (reply.content or reply.tool_calls)):
        return _completion(model, prompt_tokens, cache, None, (), "length", budget, thought, thought_tokens,
                           reply.chunk)
    budget -= thought_tokens
    content: str | None = None
    calls: tuple[ToolCall, ...] = ()
    used, cut = 0, False
    if reply.content is not None or not reply.tool_calls:
        full = reply.content or ""
        content, used = _cut(full, budget)
        cut = content != full
    if reply.tool_calls and not cut:
        # A scenario's reply is kept (`scenarios._asked`): its calls, the same tuple reply after
        # reply, are counted once (results/bench.md, speed tricks: "a reply's message written once").
        kept = _CALLS_COUNTED.get(id(reply.tool_calls))
        if kept is not None and kept[0] is reply.tool_calls:
            calls_used = kept[1]
        else:
            calls_used = _calls_tokens(reply.tool_calls)
            if len(_CALLS_COUNTED) >= CALLS_KEPT:
                _CALLS_COUNTED.clear()
            _CALLS_COUNTED[id(reply.tool_calls)] = (reply.tool_calls, calls_used)
        room = budget - used
        cut = calls_used > room
        calls = _cut_calls(reply.tool_calls, room) if cut else reply.tool_calls
        used += min(calls_used, room)
    finish: FinishReason = "length" if cut else ("tool_calls" if calls else "stop")
    if reply.usage is not None and not cut:
        # The recording is the truth: reasoning stays a part of its completion count.
        thought_tokens = min(thought_tokens, reply.usage.completion_tokens)
        prompt_tokens, used = reply.usage.prompt_tokens, reply.usage.completion_tokens - thought_tokens
        cache = caching.within(cache, prompt_tokens)
    return _completion(model, prompt_tokens, cache, content, calls, finish, used + thought_tokens,
                       thought, thought_tokens, reply.chunk)


def _reasoning(reasoning: str | int | None, budget: int) -> tuple[str | None, int, bool]:
    """The reasoning text (cut to `budget`), its token count, and whether it was cut."""
    if reasoning is None:
        return None, 0, False
    if isinstance(reasoning, int):
        return None, min(reasoning, budget), reasoning > budget
    text, used = _cut(reasoning, budget)
    return text, used, text != reasoning


def _completion(
    model: str, prompt_tokens: int, cache: Cache, content: str | None, calls: tuple[ToolCall, ...],
    finish: FinishReason, used: int, reasoning: str | None, reasoning_tokens: int, chunk: int,
) -> Completion:
    return Completion(
        id=f"chatcmpl-{getrandbits(96):024x}",  # unique, not secret: no system call per reply
        created=int(time.time()),
        model=model,
        content=content,
        tool_calls=calls,
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
        completion_tokens=used,
        cache=cache,
        reasoning=reasoning,
        reasoning_tokens=reasoning_tokens,
        chunk=chunk,
    )
