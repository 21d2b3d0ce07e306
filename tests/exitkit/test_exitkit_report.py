"""`python -m exitkit run`: the report card, its JSON schema, and its exit status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from exitkit.__main__ import main
from exitkit.report import SCHEMA
from exitkit.verdict import CRITERIA, VERDICTS


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("card")
    code = main(["run", "exitkit.adapters.plain:PlainLoop", "broken_loops:SwallowsErrors",
                 "--only", "tool_error,crash", "--out", str(out)])
    return code, out


def test_a_failed_case_makes_the_run_exit_1(card: tuple[int, Path]) -> None:
    assert card[0] == 1


def test_report_json_holds_one_result_per_case_per_adapter_in_its_schema(card: tuple[int, Path]) -> None:
    data = json.loads((card[1] / "report.json").read_text())
    assert data["schema"] == SCHEMA
    assert list(data["cases"]) == ["tool_error", "crash"]
    assert data["cases"]["tool_error"]["criteria"] == CRITERIA["tool_error"]
    assert [a["name"] for a in data["adapters"]] == ["plain openai loop", "swallows tool errors"]
    verdicts = {(r["adapter"], r["case"]): r["verdict"] for r in data["results"]}
    assert verdicts == {
        ("plain openai loop", "tool_error"): "pass", ("plain openai loop", "crash"): "none exists",
        ("swallows tool errors", "tool_error"): "fail", ("swallows tool errors", "crash"): "pass",
    }
    for r in data["results"]:
        assert r["verdict"] in VERDICTS and r["summary"] and isinstance(r["figures"], dict)
    failed = next(r for r in data["results"] if r["verdict"] == "fail")
    assert [e["status"] for e in failed["evidence"]["requests"]] == [200, 200]


def test_report_md_is_a_card_with_a_row_per_agent_and_the_written_criteria(card: tuple[int, Path]) -> None:
    text = (card[1] / "report.md").read_text()
    assert "| agent | tool error | crash after effect |" in text
    card_rows = text.split("## Report card")[1].split("\n\n")[1].splitlines()
    assert card_rows[2] == ("| plain openai loop | PASS · recovers · 4 requests "
                            "| NONE EXISTS (no approval across processes) |")
    assert card_rows[3].startswith("| swallows tool errors | FAIL · no recovery · sent '' | PASS · ran once")
    assert CRITERIA["crash"] in text


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "nowhere:Adapter", "--out", "x"], "cannot import 'nowhere'"),
    (["run", "exitkit.adapters.ours:Ours", "--only", "turncap", "--out", "x"], "unknown case ['turncap']"),
])
def test_a_bad_spec_or_case_name_is_a_usage_error(argv: list[str], says: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert says in capsys.readouterr().err


def test_without_matplotlib_the_report_has_no_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from exitkit.report import write
    from exitkit.verdict import Result

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it now raises ImportError
    results = [Result(case="overhead", adapter="a", verdict="pass", summary="1.0×",
                      figures={"per run": [{"run": "plan, cap 20", "× bare httpx": 1.0}]})]
    written = write([], results, tmp_path)
    assert [p.name for p in written] == ["report.json", "report.md"]
    assert "![overhead]" not in (tmp_path / "report.md").read_text()
