"""The end of a chat request's reply phase, in one visit: what the prompt read from the cache,
the completion cut and counted, and the JSON reply's headers up to its length.

The chat route renders the completion (`apis.chat`); `ChatLane` sends the headers, left in the
scope (`headers.JSON_HEAD`, as the options are), with the body's length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.types import Scope

from mockprovider.offload import off_the_loop_if_large, text_chars
from mockprovider.replies import headers
from mockprovider.replies.caching import NO_CACHE, openai_read, openai_since
from mockprovider.replies.completions import Completion, complete
from mockprovider.scripts.options import Options
from mockprovider.scripts.scenarios import Reply


async def finish(
    reply: Reply, scope: Scope, model: str, prompt_tokens: int, max_tokens: int | None,
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None, turn: int,
    options: Options,
) -> Completion:
    """`reply` completed for a chat request of `prompt_tokens`, with its cache; its JSON headers
    are left in `scope` (a stream's come from `headers.adding` instead)."""
    # `caching.prompt_cache`'s OpenAI rule written in, one coroutine fewer per request.
    since = openai_since(messages, prompt_tokens, turn, options)
    cache = NO_CACHE if since is None else await off_the_loop_if_large(text_chars(since), openai_read,
                                                                      prompt_tokens, since)
    scope[headers.JSON_HEAD] = headers.json_head(scope, options)
    return complete(reply, model=model, prompt_tokens=prompt_tokens, max_tokens=max_tokens, cache=cache)
