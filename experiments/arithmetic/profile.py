"""A run's token profile: the chapter's figures are one model, and so are ours.

A `runaway`-shaped run sends a first prompt of `a` tokens; turn 2's prompt is `a + first_growth`
(the first reply and its tool result appended), and every later turn adds `growth` (= g) more.
With `d = first_growth − g`, the input tokens summed over n turns are

    input(n) = n·a + (n − 1)·d + g·n(n − 1)/2

— linear in (a, d, g), so three printed totals fix all three, exactly. Output tokens are `output`
per turn. Costs are kept in integer micro-dollars (2 per input token, 12 per output token at the
chapter's prices), so every prediction is exact arithmetic, not a float that happens to round.

The cap-100 / cap-50 input ratio depends on the profile only through a/g (and d/g):

    input(100) / input(50) = (100·x + 99·y + 4950) / (50·x + 49·y + 1225),  x = a/g, y = d/g

which is 100·99 / (50·49) ≈ 4.04 for a run that is all growth (x → 0) and falls toward 2 as the
first prompt dominates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import o200k
from experiments.chapter.figures import LIST_FILES, PRICE_IN_PER_M, PRICE_OUT_PER_M, TURN_CAP, Call

IN_MICRO = Fraction(str(PRICE_IN_PER_M))
OUT_MICRO = Fraction(str(PRICE_OUT_PER_M))
"""Micro-dollars per input / output token."""


def micro(tokens_in: int, tokens_out: int) -> Fraction:
    """Cost in micro-dollars of `tokens_in` prompt and `tokens_out` completion tokens."""
    return tokens_in * IN_MICRO + tokens_out * OUT_MICRO


def dollars(micro_usd: Fraction | int) -> float:
    return float(Fraction(micro_usd) / 1_000_000)


@dataclass(frozen=True, kw_only=True)
class Profile:
    first_prompt: int
    """a: the first prompt (system, task, tool definitions)."""
    first_growth: int
    """What turn 2's prompt adds: the first reply and its tool result."""
    growth: int
    """g: what every later turn's prompt adds."""
    output: int
    """Output tokens per turn (the reply's tool-call JSON)."""

    @property
    def extra_first(self) -> int:
        """d = first_growth − g."""
        return self.first_growth - self.growth

    def prompt(self, k: int) -> int:
        """Prompt tokens of turn k (1-based)."""
        return self.first_prompt if k == 1 else self.first_prompt + self.first_growth + (k - 2) * self.growth

    def input(self, n: int) -> int:
        """Input tokens summed over n turns."""
        return (
            0
            if n <= 0
            else n * self.first_prompt + (n - 1) * self.extra_first + self.growth * n * (n - 1) // 2
        )

    def cost_micro(self, n: int) -> Fraction:
        return micro(self.input(n), n * self.output)

    def cost(self, n: int) -> float:
        return dollars(self.cost_micro(n))

    def soft_budget_turns(self, budget_usd: float) -> int:
        """Turns a run makes when the budget is checked before each call: it stops at the first n
        whose spend reaches the budget (that last turn is the overshoot)."""
        limit = Fraction(str(budget_usd)) * 1_000_000
        n = 1
        while self.cost_micro(n) < limit:
            n += 1
        return n

    def input_ratio(self, big: int, small: int) -> float:
        return self.input(big) / self.input(small)

    def cost_ratio(self, big: int, small: int) -> float:
        return float(self.cost_micro(big) / self.cost_micro(small))


def fit(input_by_turns: Mapping[int, int], *, output: int) -> Profile:
    """The profile whose `input(n)` passes through three (n, total input) points, solved exactly.

    Raises ValueError if the solution is not in whole tokens: then the figures are not one profile.
    """
    if len(input_by_turns) != 3:
        raise ValueError(f"need exactly three (turns, input) points, got {dict(input_by_turns)}")
    rows = [
        (Fraction(n), Fraction(n - 1), Fraction(n * (n - 1), 2), Fraction(t))
        for n, t in input_by_turns.items()
    ]
    a, d, g = _solve3(rows)
    if any(v.denominator != 1 for v in (a, d, g)):
        raise ValueError(f"the points fit no whole-token profile: a={a}, d={d}, g={g}")
    return Profile(first_prompt=int(a), first_growth=int(d + g), growth=int(g), output=output)


def _solve3(rows: list[tuple[Fraction, Fraction, Fraction, Fraction]]) -> tuple[Fraction, Fraction, Fraction]:
    """Cramer's rule for three linear equations c0·x + c1·y + c2·z = rhs."""

    def det(m: list[list[Fraction]]) -> Fraction:
        return (
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        )

    base = [list(r[:3]) for r in rows]
    whole = det(base)
    if whole == 0:
        raise ValueError("the three points are not independent")
    out = []
    for col in range(3):
        m = [list(r[:3]) for r in rows]
        for i, r in enumerate(rows):
            m[i][col] = r[3]
        out.append(det(m) / whole)
    return out[0], out[1], out[2]


def implied_growth(input_tokens: int, turns: int, base: Profile) -> Fraction:
    """The per-turn growth g that makes `turns` turns total `input_tokens`, keeping a and d of `base`."""
    rest = input_tokens - turns * base.first_prompt - (turns - 1) * base.extra_first
    return Fraction(rest, turns * (turns - 1) // 2)


def implied_output(cost_usd: float, input_tokens: int, turns: int) -> Fraction:
    """Output tokens per turn that, with `input_tokens`, cost `cost_usd` over `turns` turns."""
    out_micro = Fraction(str(cost_usd)) * 1_000_000 - input_tokens * IN_MICRO
    return out_micro / OUT_MICRO / turns


def call_tokens(call: Call) -> int:
    """Completion tokens of a reply carrying `call`: its tool-call JSON as the wire carries it."""
    return o200k.count(o200k.tool_calls_json(call.wire()))


def chapter_profile() -> Profile:
    """The chapter's runaway table (3,431 @ 8, 88,649 @ 50, 337,299 @ 100), fitted; output per turn
    is its `list_files` reply counted (23, as its trace prints)."""
    return fit(dict(TURN_CAP.input_by_cap), output=call_tokens(LIST_FILES))


def ratio_curve(x: float, y: float = 0.0, big: int = 100, small: int = 50) -> float:
    """input(big)/input(small) as a function of x = a/g and y = d/g (see the module docstring)."""

    def total(n: int) -> float:
        return n * x + (n - 1) * y + n * (n - 1) / 2

    return total(big) / total(small)


def with_first_prompt(usage: Sequence[Any], a: int) -> Fraction:
    """A run's cost in micro-dollars had its first prompt been `a` tokens: every turn resends the
    first prompt, so every prompt moves by `a − usage[0].prompt_tokens`; replies stay the same."""
    shift = a - usage[0].prompt_tokens if usage else 0
    return sum((micro(u.prompt_tokens + shift, u.completion_tokens) for u in usage), Fraction(0))
