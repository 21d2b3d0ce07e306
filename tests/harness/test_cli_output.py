"""What the CLI prints for a person or a program: hints that work as typed, money without float noise."""

import json
import re
import shlex

import pytest

from harness.cli import main

HINT = re.compile(r"^   (?:raise the limit and run|decide|resume): +(harness [^|]+?)\s*(?:\||$)", re.M)


def _hint(out: str) -> list[str]:
    found = HINT.search(out)
    assert found, out
    words = shlex.split(found[1])
    assert words[0] == "harness"
    return words[1:]


@pytest.mark.parametrize(
    ("limits", "grows"),
    [(["--max-turns", "3"], "turns"), (["--max-turns", "none", "--budget", "0.004"], "cost_usd")],
)
def test_the_printed_resume_command_raises_the_limit_that_stopped_the_run(mock_url, tmp_path, capsys,
                                                                          limits, grows):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "runaway", "--run-id", "r1", *limits]) == 3
    first = capsys.readouterr().out
    assert main([*argv, *_hint(first)]) == 3  # runaway never answers: it stops again, further on
    second = capsys.readouterr().out
    before, after = (float(re.search(rf"{k}=\$?([\d.]+)", o)[1]) for o in (first, second)
                     for k in [{"turns": "turns", "cost_usd": "cost"}[grows]])
    assert after > before


def test_the_printed_decision_command_decides_the_waiting_call(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    assert main([*argv, "run", "--scenario", "destructive", "--run-id", "d1"]) == 3
    assert main([*argv, *_hint(capsys.readouterr().out)]) == 0
    assert "Deleted access.log" in capsys.readouterr().out


def test_money_in_the_json_a_program_reads_carries_no_float_noise(mock_url, tmp_path, capsys):
    argv = ["--state-dir", str(tmp_path), "--base-url", mock_url]
    main([*argv, "run", "--scenario", "runaway", "--max-turns", "none", "--budget", "0.01", "--run-id", "b1"])
    capsys.readouterr()
    main([*argv, "show", "b1", "--json"])
    shown = json.loads(capsys.readouterr().out)
    main([*argv, "list", "--json"])
    listed = json.loads(capsys.readouterr().out.splitlines()[0])
    for cost in (shown["cost_usd"], listed["cost_usd"]):
        assert cost > 0.01 and len(repr(cost).split(".")[1]) <= 9, cost
