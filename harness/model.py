"""The model seam: what the loop needs from a model, and the types it hands back.

The loop asks a model two things: complete a conversation, and say what a conversation would
cost in prompt tokens before sending it (the hard budget prices the prompt first). Anything
with those two methods is a model. `harness.client.OpenAIChat` is one over any
OpenAI-compatible endpoint, counting prompts with the `o200k_base` formula of the `o200k`
package (exact against this lab's mock; against another provider an estimate, and a hard
budget is only as good as it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from harness.cancel import Cancel
from harness.usage import Usage


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


class ProviderError(Exception):
    """The provider refused the request for good, or kept failing past the retry bound."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


@dataclass(frozen=True, kw_only=True)
class Completion:
    message: dict[str, Any]
    """The assistant message, trimmed to role, content and tool_calls."""
    finish_reason: str
    usage: Usage
    attempts: int
    """How many HTTP attempts this completion took (1 = no retry)."""
