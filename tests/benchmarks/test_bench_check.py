"""`make bench-check`'s verdicts: a ratio past its bound is measured again once, then fails by name."""

from __future__ import annotations

from experiments.bench import check as bench_check
from experiments.bench.check import Ratio


def _sequence(*values: float):
    """A check whose successive measurements are `values`."""
    measured = iter(values)
    calls = []

    def check() -> Ratio:
        calls.append(1)
        return Ratio(name="mock at turn 100 / floor", value=next(measured), bound=1.5)

    return check, calls


def test_a_ratio_over_its_bound_once_is_measured_again_and_passes(capsys):
    check, calls = _sequence(1.9, 1.2)
    [ratio] = bench_check.run([check])
    assert ratio.ok and ratio.value == 1.2 and len(calls) == 2
    assert "measuring again" in capsys.readouterr().out


def test_a_ratio_over_its_bound_twice_fails_naming_ratio_value_and_bound(monkeypatch, capsys):
    check, calls = _sequence(1.9, 1.8)
    monkeypatch.setattr(bench_check, "CHECKS", [check])
    assert bench_check.main() == 1
    assert len(calls) == 2
    assert "mock at turn 100 / floor is 1.80x, bound 1.50x" in capsys.readouterr().err


def test_ratios_within_bounds_pass_after_one_measurement(monkeypatch):
    check, calls = _sequence(1.1)
    monkeypatch.setattr(bench_check, "CHECKS", [check])
    assert bench_check.main() == 0 and len(calls) == 1


def test_the_mock_floor_check_is_registered():
    assert bench_check.mock_vs_floor_turn_100 in bench_check.CHECKS


def test_a_speed_up_ratio_fails_at_or_below_its_bound_and_says_so():
    saves_nothing = Ratio(name="least speed trick", value=1.0, bound=1.02, at_least=True)
    saves = Ratio(name="least speed trick", value=1.3, bound=1.02, at_least=True)
    assert not saves_nothing.ok and saves.ok
    assert "1.00x (bound > 1.02x) UNDER BOUND" in saves_nothing.line()


def test_the_speed_tricks_check_is_registered():
    assert bench_check.speed_tricks_earn_their_lines in bench_check.CHECKS
