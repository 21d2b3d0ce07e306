"""The chapter's arithmetic: what counts as a prediction, and checks that can fail."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from types import SimpleNamespace

import pytest

from experiments.arithmetic import arithmetic
from experiments.arithmetic.predictions import chapter_predictions, printed_range, truncates_to
from experiments.arithmetic.profile import chapter_profile
from experiments.chapter import figures

pytestmark = pytest.mark.slow

RATIO_CHECK = "our turns 1–3 predict our cap-100 input and the 100/50 ratio"


@pytest.fixture(scope="module")
def measured(measure):
    return measure(arithmetic)


def test_the_chapters_runaway_table_fits_whole_tokens_and_its_trace_prompts():
    c = chapter_profile()
    assert (c.prompt(1), c.prompt(2)) == figures.PLAN.prompt_per_turn[:2]


def test_fit_points_and_recombined_figures_are_not_counted_as_predictions():
    verdicts = {x.figure: x.verdict for x in chapter_predictions(chapter_profile())}
    assert {verdicts[f"runaway input @{n}"] for n, _ in figures.TURN_CAP.input_by_cap} == {"restated"}
    assert verdicts["input ×, cap 100 / 50"] == "restated"
    assert verdicts["plan cost (and the resumed run's)"] == "restated"
    assert verdicts["plan prompt, turn 3"] == "not predicted"


def test_above_a_printed_cost_means_within_its_last_digit():
    assert truncates_to(Fraction("0.038038"), 0.038)
    assert not truncates_to(Fraction("0.0391"), 0.038)
    assert not truncates_to(Fraction("0.0379"), 0.038)


def test_a_printed_ratio_stands_for_half_a_last_digit_either_side():
    assert printed_range(4.7) == (Fraction("4.65"), Fraction("4.75"))


def test_our_ratio_is_predicted_before_cap_100_is_seen(measured):
    assert arithmetic.checks(measured)[RATIO_CHECK] is True
    assert arithmetic.measured_ratio(measured) == measured.ours.input_ratio(100, 50)


def test_a_cap_100_run_off_the_profile_turns_the_ratio_check_false(measured):
    off = replace(measured, caps={**measured.caps, 100: measured.caps[50]})
    assert arithmetic.checks(off)[RATIO_CHECK] is False


def test_caps_that_fit_no_whole_profile_turn_a_check_false_not_raise(measured):
    def run(tokens: int):
        usage = [SimpleNamespace(completion_tokens=measured.ours.output)]
        return SimpleNamespace(state=SimpleNamespace(prompt_tokens=tokens, turn_usage=usage))

    caps = {8: run(1_001), 20: run(5_000), 50: run(30_001)}
    assert arithmetic._fit_or_none(caps) is None
    check = "our caps 8, 20, 50 fit one whole-token profile, the one turns 1–3 show"
    assert arithmetic.checks(replace(measured, caps_fit=None))[check] is False


def test_the_pending_order_check_fails_when_its_row_is_missing(measured, monkeypatch):
    """A check over the rows of one name must not pass vacuously when no row has that name."""
    check = "a capped run keeps its last call pending (denied: tool runs = turns − 1)"
    assert arithmetic.checks(measured)[check] is True
    monkeypatch.setattr(arithmetic, "DENIED_PENDING", "a row no prediction carries")
    assert arithmetic.checks(measured)[check] is False
