"""Tokens, money and limits: usage you can add, prices, and the one place limits are checked.

The loop asks two questions here, both before anything runs:
- `limit_hit()`, at the top of every iteration: has the turn cap or the budget been reached?
  (the chapter's order: a capped run keeps its pending calls for a resume);
- `reply_cap()`, just before a model call under a hard budget: how many reply tokens can the
  money left buy, given the exact price of the prompt about to be sent?
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

MAX_COUNT = 2**53
"""Counts at or above this cannot be priced exactly as floats: no real run gets near it."""


@dataclass(frozen=True)
class NonNegative:
    """Type annotation marker: a finite number >= 0 (checked when a saved run is loaded)."""

    def check(self, value: float) -> str | None:
        if isinstance(value, int):  # math.isfinite would overflow on a 400-digit integer
            if not 0 <= value < MAX_COUNT:
                return f"must be a whole number in [0, 2**53), got {str(value)[:40]}"
            return None
        if not math.isfinite(value) or value < 0:
            return f"must be a finite number >= 0, got {value!r}"
        return None


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Token counts as the provider bills them (Chat Completions' convention: the details are
    parts of the two totals, not additions to them)."""

    prompt_tokens: Annotated[int, NonNegative()] = 0
    completion_tokens: Annotated[int, NonNegative()] = 0
    cached_tokens: Annotated[int, NonNegative()] = 0
    """The part of `prompt_tokens` read from the provider's prompt cache."""
    cache_write_tokens: Annotated[int, NonNegative()] = 0
    """The part of `prompt_tokens` written to the cache (billed extra by Anthropic)."""
    reasoning_tokens: Annotated[int, NonNegative()] = 0
    """The part of `completion_tokens` the model spent reasoning."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


_PRICES = ("input_per_million", "output_per_million", "cached_input_per_million",
           "cache_write_per_million", "reasoning_per_million")


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """Dollars per million tokens; the default is the chapter's $2 in / $12 out.

    A price left None is the list price of its total (input or output), so tokens it would
    cover are billed at that list price: cached and reasoning tokens cost nothing different unless a
    rate is given, e.g. Anthropic's `Pricing(input_per_million=3, output_per_million=15,
    cached_input_per_million=0.3, cache_write_per_million=3.75)`.
    """

    input_per_million: float = 2.0
    output_per_million: float = 12.0
    cached_input_per_million: float | None = None
    """Cache reads; None: the input price."""
    cache_write_per_million: float | None = None
    """Cache writes; None: the input price."""
    reasoning_per_million: float | None = None
    """Reasoning tokens; None: the output price (every provider bills them as output)."""

    def __post_init__(self) -> None:
        for name in _PRICES:
            value = getattr(self, name)
            if value is not None and NonNegative().check(value):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def input_per_token(self) -> float:
        return self.input_per_million / 1e6

    @property
    def output_per_token(self) -> float:
        return self.output_per_million / 1e6

    def dearest_per_token(self) -> tuple[float, float]:
        """The highest price a prompt token and a reply token can cost, in dollars."""
        prompt = max(self.input_per_million, self.cached_input_per_million or 0.0,
                     self.cache_write_per_million or 0.0)
        reply = max(self.output_per_million, self.reasoning_per_million or 0.0)
        if (prompt, reply) == (self.input_per_million, self.output_per_million):
            return self.input_per_token, self.output_per_token  # the same floats as ever
        return prompt / 1e6, reply / 1e6

    def cost(self, usage: Usage) -> float:
        # Tokens whose own price is unset stay in their total's term, so a run without cache or
        # reasoning prices costs, to the last bit, what the two list prices make it.
        # Parts are clamped to what is left of their total: a provider (or an edited saved run)
        # may report parts that overlap, and no token is billed twice or below nothing.
        prompt, completion, extra = usage.prompt_tokens, usage.completion_tokens, 0.0
        for tokens, price in ((usage.cached_tokens, self.cached_input_per_million),
                              (usage.cache_write_tokens, self.cache_write_per_million)):
            if price is not None and tokens:
                tokens = min(tokens, prompt)
                prompt -= tokens
                extra += tokens * price / 1e6
        if self.reasoning_per_million is not None and usage.reasoning_tokens:
            reasoning = min(usage.reasoning_tokens, completion)
            completion -= reasoning
            extra += reasoning * self.reasoning_per_million / 1e6
        return prompt * self.input_per_token + completion * self.output_per_token + extra


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_turns: int | None = 20
    """Model calls allowed in the run (across resumes); None = no cap."""
    max_budget_usd: float | None = None
    """Dollars the run may spend (across resumes, sub-agents included); None = no budget."""
    hard_budget: bool = False
    """Cap `max_tokens` from an exact prompt count so spend never exceeds the budget."""

    def __post_init__(self) -> None:
        turns, budget = self.max_turns, self.max_budget_usd
        if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 0):
            raise ValueError(f"max_turns must be an integer >= 0 or None, got {turns!r}")
        if budget is not None and NonNegative().check(budget):
            raise ValueError(f"max_budget_usd must be a finite number >= 0 or None, got {budget!r}")

    def spent_for_check(self, cost_usd: float, last_turn_usd: float) -> float:
        """What the budget is compared with: everything spent, the latest model call included."""
        return cost_usd

    def budget_left(self, cost_usd: float) -> float | None:
        return None if self.max_budget_usd is None else max(0.0, self.max_budget_usd - cost_usd)


LimitHit = Literal["max_turns", "max_budget"]


def limit_hit(limits: Limits, *, turns: int, cost_usd: float, last_turn_usd: float = 0.0) -> LimitHit | None:
    """Which limit stops the run before its next step, if any.

    `last_turn_usd` is what the latest model call cost (a teaching variant of `Limits` in
    `harness.chapter` leaves it out, to show what checking in the wrong place costs).
    """
    if limits.max_turns is not None and turns >= limits.max_turns:
        return "max_turns"
    budget = limits.max_budget_usd
    if budget is None:
        return None
    return "max_budget" if limits.spent_for_check(cost_usd, last_turn_usd) >= budget else None


def reply_cap(
    limits: Limits, pricing: Pricing, *, cost_usd: float, prompt_tokens: int, min_reply_tokens: int = 1
) -> int | None:
    """Hard budget: the most completion tokens the next call may buy; None when uncapped, and 0
    when the turn must be refused (not even `min_reply_tokens` are affordable).

    `prompt_tokens` is the exact count of what is about to be sent, so the prompt's price is
    known before the call and only the reply has to be bounded.
    """
    if not limits.hard_budget or limits.max_budget_usd is None:
        return None
    # The provider decides after the call how much of the prompt it read from or wrote to its
    # cache, and how much of the reply is reasoning: price each at its dearest possible rate.
    prompt_rate, reply_rate = pricing.dearest_per_token()
    left = limits.max_budget_usd - cost_usd - prompt_tokens * prompt_rate
    if reply_rate == 0:
        return None if left >= 0 else 0
    # The epsilon keeps float rounding from buying one token the budget cannot pay for.
    cap = max(0, int((left - 1e-12) // reply_rate))
    return cap if cap >= max(1, min_reply_tokens) else 0
