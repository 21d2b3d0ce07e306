"""The end of a chat request's reply phase, in one visit: what the prompt read from the cache,
the completion cut and counted, and the JSON reply's headers up to its length.

The chat route renders the completion (`apis.chat`); `ChatLane` sends the headers, left in the
scope (`headers.JSON_HEAD`, in the form the lane asked for), with the body's length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.types import Scope

from mockprovider.offload import INLINE_CHARS, off_the_loop_if_large, text_chars
from mockprovider.replies import headers
from mockprovider.replies.caching import NO_CACHE, Cache, openai_read, openai_since
from mockprovider.replies.completions import Completion, complete
from mockprovider.scripts.options import Options
from mockprovider.scripts.scenarios import Reply


async def prompt_cache(messages: Sequence[Mapping[str, Any]], prompt_tokens: int, turn: int,
                       options: Options) -> Cache:
    """What a chat prompt of `prompt_tokens` read from the cache (`caching.prompt_cache`'s OpenAI
    rule), counted on a worker thread when the messages it counts are large."""
    since = openai_since(messages, prompt_tokens, turn, options)
    if since is None:
        return NO_CACHE
    chars = text_chars(since)
    if chars <= INLINE_CHARS:
        return openai_read(prompt_tokens, since)
    return await off_the_loop_if_large(chars, openai_read, prompt_tokens, since)


def prompt_cache_here(messages: Sequence[Mapping[str, Any]], prompt_tokens: int, turn: int,
                      options: Options) -> Cache | None:
    """`prompt_cache`, when what it counts is short enough to count here, with no coroutine; None
    when it is not."""
    since = openai_since(messages, prompt_tokens, turn, options)
    if since is None:
        return NO_CACHE
    return openai_read(prompt_tokens, since) if text_chars(since) <= INLINE_CHARS else None


def finish(reply: Reply, scope: Scope, model: str, prompt_tokens: int, max_tokens: int | None, cache: Cache,
           options: Options) -> Completion:
    """`reply` completed for a chat request of `prompt_tokens` that read `cache`; its JSON headers
    are left in `scope` (a stream's come from `headers.adding` instead). A plain function: the
    route awaits `prompt_cache` only when the OpenAI rule has something to count."""
    scope[headers.JSON_HEAD] = (headers.json_lines if scope.get(headers.AS_LINES) else headers.json_head)(
        scope, options)
    return complete(reply, model=model, prompt_tokens=prompt_tokens, max_tokens=max_tokens, cache=cache)
