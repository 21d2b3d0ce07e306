"""The chapter's three cost ratios we do not reproduce, as numbers rather than a sentence.

tool_errors (descriptive ÷ fatal row), permanent_error (denied floor ÷ recovered run) and dedupe
(the repeat's extra ÷ the baseline) are ratios of whole runs, and the chapter prints neither run's
transcript. What can be computed: our own runs with the chapter's first prompt in place of ours
(`profile.with_first_prompt`) — the part of the difference the first prompt's size explains. What
is left is the chapter's other texts (tool results, answers), which it does not print.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from experiments.arithmetic.predictions import Prediction, rounds_to
from experiments.arithmetic.profile import Profile, with_first_prompt
from experiments.chapter import figures
from experiments.lab.report import usd
from experiments.lab.runs import Run


@dataclass(frozen=True, kw_only=True)
class Ratio:
    figure: str
    printed: float
    """The chapter's figure (a ratio, or a percentage for dedupe)."""
    ours: float
    at_chapter_a: float
    """Ours, recomputed with the chapter's first prompt."""
    our_a: int
    chapter_a: int
    printed_over_ours: float | None = None
    """The chapter's own printed numerator over our denominator at its first prompt: what is left
    once the numerator is the chapter's run rather than ours."""
    numerator: str = ""

    @property
    def unit(self) -> str:
        return "%" if self.figure.startswith("dedupe") else "×"

    def text(self) -> str:
        u = self.unit
        more = (
            f"; its printed {self.numerator} over ours gives {self.printed_over_ours:.2f}{u}"
            if self.printed_over_ours is not None
            else ""
        )
        return (
            f"with the chapter's first prompt ({self.chapter_a} tokens for our {self.our_a}) our runs give "
            f"{self.at_chapter_a:.2f}{u} (ours {self.ours:.2f}{u}, the chapter's {self.printed}{u}){more}"
        )


def _quotient(figure: str, printed: float, num: Run, den: Run, c: Profile, **more: Any) -> Ratio:
    """num's cost over den's: as measured, and with the chapter's first prompt in both."""
    n, d = num.state.turn_usage, den.state.turn_usage
    ours = with_first_prompt(n, n[0].prompt_tokens) / with_first_prompt(d, d[0].prompt_tokens)
    return Ratio(
        figure=figure,
        printed=printed,
        ours=float(ours),
        at_chapter_a=float(with_first_prompt(n, c.first_prompt) / with_first_prompt(d, c.first_prompt)),
        our_a=n[0].prompt_tokens,
        chapter_a=c.first_prompt,
        **more,
    )


def tool_errors(c: Profile, fatal: Run, recovered: Run) -> Ratio:
    te = figures.TOOL_ERRORS
    return _quotient("tool_errors: descriptive ÷ fatal row", te.descriptive_vs_first, recovered, fatal, c)


def permanent_error(c: Profile, floor: Run, recovered: Run) -> Ratio:
    denied = Fraction(str(figures.DENIED.cost_usd)) * 1_000_000
    return _quotient(
        "permanent_error: denied floor ÷ recovered run",
        figures.DENIED.vs_recovered,
        floor,
        recovered,
        c,
        printed_over_ours=float(denied / with_first_prompt(recovered.state.turn_usage, c.first_prompt)),
        numerator=f"denied cost ({usd(figures.DENIED.cost_usd)})",
    )


def dedupe(c: Profile, once: Run, repeat: Run) -> Ratio:
    """The repeat's extra as a percentage of the baseline `once`."""
    o, r = once.state.turn_usage, repeat.state.turn_usage

    def pct(a_once: int, a_repeat: int) -> float:
        base = with_first_prompt(o, a_once)
        return float((with_first_prompt(r, a_repeat) - base) / base * 100)

    extra = Fraction(str(figures.DEDUPE.extra_usd)) * 1_000_000
    return Ratio(
        printed_over_ours=float(extra / with_first_prompt(o, c.first_prompt) * 100),
        numerator=f"extra (+{usd(figures.DEDUPE.extra_usd)})",
        figure="dedupe: the repeat's extra, % of once",
        printed=figures.DEDUPE.extra_pct,
        ours=pct(o[0].prompt_tokens, r[0].prompt_tokens),
        at_chapter_a=pct(c.first_prompt, c.first_prompt),
        our_a=o[0].prompt_tokens,
        chapter_a=c.first_prompt,
    )


def explains(x: Ratio) -> bool:
    """Ours, moved to the chapter's first prompt (and, where it prints one, its numerator), prints
    as the chapter's figure at the chapter's precision."""
    value = x.at_chapter_a if x.printed_over_ours is None else x.printed_over_ours
    return rounds_to(value, x.printed)


def prediction(x: Ratio) -> Prediction:
    """A row of the arithmetic table; `consistent` is `explains(x)`, and the difference says what
    the first prompt alone leaves, and what is left once the chapter's printed numerator is used."""
    u, alone = x.unit, x.printed - x.at_chapter_a
    predicted, left = f"{x.at_chapter_a:.2f}{u} with its first prompt", ""
    if not rounds_to(x.at_chapter_a, x.printed):
        left = f"the first prompt alone leaves {alone:+.2f}{u}"
    if x.printed_over_ours is not None:
        predicted += f"; {x.printed_over_ours:.2f}{u} with its printed {x.numerator}"
        left += f"; with its printed {x.numerator}, {x.printed - x.printed_over_ours:+.2f}{u}"
    return Prediction(
        figure=x.figure,
        printed=f"chapter {x.printed}{u}; ours {x.ours:.2f}{u}",
        predicted=predicted,
        how=f"our runs, every prompt moved by {x.chapter_a} − {x.our_a} (the chapter's a for ours)",
        consistent=explains(x),
        verdict="predicted",
        difference=left.lstrip("; "),
    )
