"""The model seam: what the loop needs from a model, and the OpenAI-compatible one.

The loop asks a model two things: complete a conversation, and say what a conversation would
cost in prompt tokens before sending it (the hard budget prices the prompt first). Anything
with those two methods is a model; `OpenAIChat` is one over any OpenAI-compatible endpoint,
counting prompts with the `o200k_base` formula of the `o200k` package (exact against this
lab's mock; against another provider an estimate, and a hard budget is only as good as it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import o200k
from harness.cancel import Cancel
from harness.client import Completion, ModelClient


@runtime_checkable
class Model(Protocol):
    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None,
        cancel: Cancel,
    ) -> Completion:
        """One reply; raises `ProviderError` (final) or `Cancelled` (the signal was set)."""
        ...

    def count_prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> int:
        """What sending `messages` and `tools` as one prompt would be billed, in tokens."""
        ...


class OpenAIChat:
    """`name` behind a chat-completions endpoint. Use `async with`, or pass your own `client`.

    `headers` go with every request (e.g. `{"x-mock-options": "latency=250"}` for the mock).
    """

    def __init__(
        self, name: str, *, client: ModelClient | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.headers = dict(headers or {})
        self._own = client is None
        self.client = client or ModelClient()

    async def __aenter__(self) -> OpenAIChat:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._own:
            await self.client.aclose()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None,
        cancel: Cancel,
    ) -> Completion:
        return await self.client.complete(
            model=self.name, messages=list(messages), tools=list(tools) if tools else None,
            max_tokens=max_tokens, cancel=cancel, headers=self.headers,
        )

    def count_prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> int:
        return o200k.prompt_tokens(messages, tools)

    def with_name(self, name: str) -> OpenAIChat:
        """The same endpoint and client under another model name (a sub-agent's, say)."""
        return OpenAIChat(name, client=self.client, headers=self.headers)
