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

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import o200k
from mockprovider.errors import invalid
from mockprovider.offload import off_the_loop_if_large, text_chars

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


def within(cache: Cache, prompt_tokens: int) -> Cache:
    """`cache` shrunk to fit a prompt of `prompt_tokens` (a reply's recorded count, which may be
    shorter than the counted one the cache was derived from): reads first, then 1 h, then 5 m
    writes; a shrunk read keeps OpenAI's step. A prompt under both providers' minimum is never cached."""
    if cache.read + cache.write <= prompt_tokens:
        return cache
    if prompt_tokens < min(OPENAI_MIN_TOKENS, ANTHROPIC_MIN_TOKENS):
        return NO_CACHE
    read = cache.read if cache.read <= prompt_tokens else prompt_tokens - prompt_tokens % OPENAI_STEP_TOKENS
    write_1h = min(cache.write_1h, prompt_tokens - read)
    return Cache(read=read, write_5m=min(cache.write_5m, prompt_tokens - read - write_1h), write_1h=write_1h)


class Breakpoint(NamedTuple):
    """A `cache_control` mark: the prefix through `tools` tool definitions and `messages` chat
    messages (the request translated to chat shape) is cached for `ttl`."""

    tools: int
    messages: int
    ttl: Ttl
    text: str | None = None
    """The last message's text through the marked block, when text blocks after the mark share
    that message (they are not cached); None: the whole message is."""


def _last_assistant(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    return None


def _reads(turn: int, options: Any) -> bool:
    return options.cache and turn not in options.cache_misses


def openai(messages: Sequence[Mapping[str, Any]], prompt_tokens: int, turn: int, options: Any) -> Cache:
    """The OpenAI rule: the previous turn's whole prompt, floored to the step, when long enough."""
    since = openai_since(messages, prompt_tokens, turn, options)
    return NO_CACHE if since is None else openai_read(prompt_tokens, since)


def openai_since(
    messages: Sequence[Mapping[str, Any]], prompt_tokens: int, turn: int, options: Any
) -> Sequence[Mapping[str, Any]] | None:
    """The messages sent since the previous turn's prompt, which `openai_read` counts; None when
    the OpenAI rule reads nothing without counting."""
    if prompt_tokens < OPENAI_MIN_TOKENS or not _reads(turn, options):  # most requests: nothing to do
        return None
    last = _last_assistant(messages)
    return None if last is None else messages[last:]


def openai_read(prompt_tokens: int, since: Sequence[Mapping[str, Any]]) -> Cache:
    """The OpenAI rule's read, given the messages sent `since` the previous turn's prompt."""
    # The formula is additive: the previous prompt is this one less the messages sent since.
    previous = prompt_tokens - sum(map(o200k.message_tokens, since))
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
        end = sum(tool_counts[: b.tools]) + sum(message_counts[: b.messages])
        if b.text is None:
            return end
        whole = message_counts[b.messages - 1]
        cut = o200k.message_tokens({**messages[b.messages - 1], "content": b.text})
        return end - whole + min(cut, whole)

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


# --- Anthropic's breakpoints, read from a Messages request ------------------------------------


def _ttl(block: Any, param: str) -> Ttl | None:
    """The TTL a block's `cache_control` asks for; None when it has none."""
    value = block.get("cache_control") if isinstance(block, dict) else None
    if value is None:
        return None
    ttl = value.get("ttl", "5m") if isinstance(value, dict) else None
    if not isinstance(value, dict) or value.get("type") != "ephemeral" or ttl not in ("5m", "1h"):
        raise invalid(
            f"{param}.cache_control: expected {{\"type\": \"ephemeral\"}} with an optional ttl of "
            f"'5m' or '1h', got {value!r}.",
            param=f"{param}.cache_control",
        )
    if extra := next((key for key in value if key not in ("type", "ttl")), None):
        raise invalid(f"{param}.cache_control.{extra}: Extra inputs are not permitted",
                      param=f"{param}.cache_control.{extra}")
    return ttl


_UNMARKABLE = ("thinking", "redacted_thinking")
"""Blocks Anthropic's schema gives no `cache_control` field (a thinking block is cached with
its turn, never marked)."""


class _Mark(NamedTuple):
    """A breakpoint found, with where it was; its message's `texts` and its block's index `k`
    among them, when text blocks join into one message (its text is joined only once the marks
    are known to be valid: joining at every block would be quadratic in the blocks)."""

    breakpoint: Breakpoint
    param: str
    texts: list[str] | None = None
    k: int = 0

    def resolved(self) -> Breakpoint:
        """The breakpoint with the message's text through the marked block, unless that block
        is the message's last (a mark caches only what precedes it)."""
        texts, k = self.texts, self.k
        if texts is None or k >= len(texts) - 1:
            return self.breakpoint
        return self.breakpoint._replace(text="".join(texts[: k + 1]))


def _message_marks(body: dict[str, Any], tools: int) -> list[_Mark]:
    """The marks in `system` and `messages`, each at the end of the chat message its block
    becomes (a tool_result block is a tool message; a user's text blocks, one user message)."""
    marks: list[_Mark] = []

    def mark(block: Any, param: str, at: int, texts: list[str] | None = None, k: int = 0) -> None:
        if isinstance(block, dict) and block.get("type") in _UNMARKABLE and "cache_control" in block:
            raise invalid(f"{param}.cache_control: Extra inputs are not permitted",
                          param=f"{param}.cache_control")
        if ttl := _ttl(block, param):
            marks.append(_Mark(Breakpoint(tools=tools, messages=at, ttl=ttl), param, texts, k))

    count = 0
    if (system := body.get("system")) is not None:
        count = 1
        blocks = system if isinstance(system, list) else []
        system_texts = [b["text"] for b in blocks]
        for j, block in enumerate(blocks):
            mark(block, f"system[{j}]", 1, system_texts, j)
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        blocks = [] if isinstance(content, str) else content
        if message["role"] == "assistant":
            count += 1
            for j, block in enumerate(blocks):
                mark(block, f"messages[{i}].content[{j}]", count)
            continue
        results = sum(1 for b in blocks if b["type"] == "tool_result")
        texts = isinstance(content, str) or results < len(blocks)
        user_texts = [b["text"] for b in blocks if b["type"] == "text"]
        answered = shown = 0
        for j, block in enumerate(blocks):
            p = f"messages[{i}].content[{j}]"
            if block["type"] == "tool_result":
                answered += 1
                mark(block, p, count + answered)
                inner = block["content"] if isinstance(block.get("content"), list) else []
                inner_texts = [b["text"] for b in inner]
                for k, part in enumerate(inner):
                    mark(part, f"{p}.content[{k}]", count + answered, inner_texts, k)
            else:
                mark(block, p, count + results + 1, user_texts, shown)
                shown += 1
        count += results + texts
    return marks


def breakpoints(body: dict[str, Any]) -> tuple[Breakpoint, ...]:
    """The request's `cache_control` marks in Anthropic's order (tools, system, messages),
    checked as Anthropic checks them: at most four, no 1 h entry after a 5 m one."""
    tools = body.get("tools") or []
    marks = [_Mark(Breakpoint(tools=i + 1, messages=0, ttl=ttl), f"tools[{i}]")
             for i, tool in enumerate(tools) if (ttl := _ttl(tool, f"tools[{i}]"))]
    marks += _message_marks(body, len(tools))
    if len(marks) > MAX_BREAKPOINTS:
        raise invalid(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                      f"Found {len(marks)}.")
    ttls = [m.breakpoint.ttl for m in marks]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m"):]:
        param = marks[ttls.index("1h", ttls.index("5m"))].param
        raise invalid(
            f"{param}.cache_control: a ttl='1h' cache_control block must not come after a ttl='5m' "
            "cache_control block. Note that blocks are processed in the following order: "
            "`tools`, `system`, `messages`.",
            param=f"{param}.cache_control",
        )
    return tuple(m.resolved() for m in marks)


async def prompt_cache(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
    breakpoints: Sequence[Breakpoint] | None, prompt_tokens: int, turn: int, options: Any,
) -> Cache:
    """What the prompt reads from and writes to the provider's cache: `openai`, or
    `anthropic` at `breakpoints`. The messages those rules count (the ones since the
    previous turn; every one, at breakpoints) go to a worker thread when large, as
    `prompt_tokens`' do: a large tool result would otherwise be counted again on the event loop."""
    if breakpoints is None:
        since = openai_since(messages, prompt_tokens, turn, options)
        if since is None:
            return NO_CACHE
        return await off_the_loop_if_large(text_chars(since), openai_read, prompt_tokens, since)
    if not breakpoints or not options.cache:
        return NO_CACHE
    size = text_chars(messages) + (len(json.dumps(tools)) if tools else 0)
    return await off_the_loop_if_large(size, anthropic, messages, tools or (), breakpoints, turn,
                                        options)
