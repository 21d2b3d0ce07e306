"""Prompt caching, derived from the conversation alone (a model of the providers' rules).

A stateless server cannot remember what it cached, but an agent loop resends its whole history
every turn, so the request itself says what the previous turn sent: everything before the last
assistant message. The model assumes that previous request reached this provider (the same
script, the same tools) and that nothing expired in between, unless an option says otherwise:

- OpenAI (Chat Completions, Responses): automatic. The previous turn's prompt is cached when it
  was at least `OPENAI_MIN_TOKENS` long, in steps of `OPENAI_STEP_TOKENS`; this turn reads that
  prefix (`cached_tokens`, a part of the prompt's count). Writes are free and reported as 0.
- Anthropic (Messages): only where the request marks `cache_control` breakpoints (at most four,
  `ttl` "5m" or "1h", 1 h entries before 5 m ones). The previous request is taken to have carried
  the breakpoints this one has within its part, and one at its own end when this request has one
  past it (the moving breakpoint of a multi-turn loop). This turn reads the longest prefix the
  previous one wrote (`cache_read_input_tokens`) and writes each breakpoint's prefix beyond it
  (`cache_creation_input_tokens`, split by TTL); `input_tokens` is the rest. Prefixes shorter
  than `ANTHROPIC_MIN_TOKENS` are never cached. Positions follow Anthropic's order: tools,
  system, messages.

Options: `cache=off` turns it off; `cache=miss@T` makes turn T read nothing (an eviction or a
routing miss: the turn writes its prefix again, so turn T+1 reads as usual). docs/caching.md
cites the providers' rules this follows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import o200k

OPENAI_MIN_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
ANTHROPIC_MIN_TOKENS = 1024
MAX_BREAKPOINTS = 4

Ttl = Literal["5m", "1h"]


class Cache(NamedTuple):
    """What one request read from and wrote to the provider's cache, in prompt tokens."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def write(self) -> int:
        return self.write_5m + self.write_1h


NO_CACHE = Cache()


class Breakpoint(NamedTuple):
    """A `cache_control` mark: the prefix through `tools` tool definitions and `messages` chat
    messages (the request translated to chat shape) is cached for `ttl`."""

    tools: int
    messages: int
    ttl: Ttl


def _last_assistant(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    return None


def _reads(turn: int, options: Any) -> bool:
    return options.cache and turn not in options.cache_misses


def openai(messages: Sequence[Mapping[str, Any]], prompt_tokens: int, turn: int, options: Any) -> Cache:
    """The OpenAI rule: the previous turn's whole prompt, floored to the step, when long enough."""
    if prompt_tokens < OPENAI_MIN_TOKENS or not _reads(turn, options):  # most requests: nothing to do
        return NO_CACHE
    last = _last_assistant(messages)
    if last is None:
        return NO_CACHE
    # The formula is additive: the previous prompt is this one less the messages sent since.
    previous = prompt_tokens - sum(map(o200k.message_tokens, messages[last:]))
    if previous < OPENAI_MIN_TOKENS:
        return NO_CACHE
    return Cache(read=previous - previous % OPENAI_STEP_TOKENS)


def anthropic(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    breakpoints: Sequence[Breakpoint],
    turn: int,
    options: Any,
) -> Cache:
    """The Anthropic rule: reads and writes at the request's `cache_control` breakpoints."""
    if not breakpoints or not options.cache:
        return NO_CACHE
    tool_counts = [o200k.tools_tokens([t]) for t in tools]
    message_counts = list(map(o200k.message_tokens, messages))

    def position(b: Breakpoint) -> int:
        return sum(tool_counts[: b.tools]) + sum(message_counts[: b.messages])

    marks = sorted((position(b), b.ttl) for b in breakpoints)
    last = _last_assistant(messages)
    read = 0
    if last is not None and _reads(turn, options):
        end = sum(tool_counts) + sum(message_counts[:last])
        written = [p for p, _ in marks if p <= end] + ([end] if marks[-1][0] > end else [])
        read = max((p for p in written if p >= ANTHROPIC_MIN_TOKENS), default=0)
    writes = {"5m": 0, "1h": 0}
    done = read
    for p, ttl in marks:
        if p > done and p >= ANTHROPIC_MIN_TOKENS:
            writes[ttl] += p - done
            done = p
    return Cache(read=read, write_5m=writes["5m"], write_1h=writes["1h"])
