"""Tokens, money and limits: usage you can add, prices, and the one place limits are checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts as the provider bills them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """Dollars per million tokens; the default is the chapter's $2 in / $12 out."""

    input_per_million: float = 2.0
    output_per_million: float = 12.0

    @property
    def input_per_token(self) -> float:
        return self.input_per_million / 1e6

    @property
    def output_per_token(self) -> float:
        return self.output_per_million / 1e6

    def cost(self, usage: Usage) -> float:
        return usage.prompt_tokens * self.input_per_token + usage.completion_tokens * self.output_per_token


BudgetCheck = Literal["before_call", "after_call"]
"""`before_call` (overshoot ≤ one turn) or `after_call`, the wrong placement the chapter warns
about: the budget is compared with the cost *before* the reply that was just paid for, so a run
overshoots by up to two turns. Kept to measure the difference."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_turns: int | None = 20
    """Model calls allowed in the run (across resumes); None = no cap."""
    max_budget_usd: float | None = None
    """Dollars the run may spend (across resumes); None = no budget."""
    hard_budget: bool = False
    """Cap `max_tokens` from an exact prompt count so spend never exceeds the budget."""
    budget_check: BudgetCheck = "before_call"

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns < 0:
            raise ValueError(f"max_turns must be >= 0 or None, got {self.max_turns}")
        if self.max_budget_usd is not None and self.max_budget_usd < 0:
            raise ValueError(f"max_budget_usd must be >= 0 or None, got {self.max_budget_usd}")
        if self.budget_check not in ("before_call", "after_call"):
            raise ValueError(f"budget_check must be 'before_call' or 'after_call', got {self.budget_check!r}")


LimitHit = Literal["max_turns", "max_budget"]


def limit_hit(limits: Limits, *, turns: int, cost_usd: float) -> LimitHit | None:
    """Which limit stops the next model call, if any (checked before the call)."""
    if limits.max_turns is not None and turns >= limits.max_turns:
        return "max_turns"
    if (
        limits.budget_check == "before_call"
        and limits.max_budget_usd is not None
        and cost_usd >= limits.max_budget_usd
    ):
        return "max_budget"
    return None


def reply_token_cap(
    limits: Limits, pricing: Pricing, *, cost_usd: float, prompt_tokens: int
) -> int | None:
    """Hard budget: the most completion tokens this turn may buy; None when there is no cap.

    `prompt_tokens` is the exact count of what is about to be sent, so the prompt's price is
    known before the call and only the reply has to be bounded.
    """
    if not limits.hard_budget or limits.max_budget_usd is None:
        return None
    left = limits.max_budget_usd - cost_usd - prompt_tokens * pricing.input_per_token
    # The epsilon keeps float rounding from buying one token the budget cannot pay for.
    return max(0, int((left - 1e-12) // pricing.output_per_token))
