"""`python -m exitkit run`: the report card, its JSON schema, and its exit status."""

from __future__ import annotations

import json
import re
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


def _cells(line: str) -> list[str]:
    """A GFM table row split as a renderer splits it: a pipe after a backslash escape is text."""
    cells, cell, i = [], "", 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            cell, i = cell + line[i:i + 2], i + 2
            continue
        if line[i] == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += line[i]
        i += 1
    return cells[1:]


HOSTILE = "a\\|b\rc\n## forged heading <img src=x onerror=alert(1)> ![px](http://evil.example/p.png) `x"


def test_strings_an_agent_or_provider_controls_stay_inside_their_cell() -> None:
    from exitkit.contract import Declared
    from exitkit.report import markdown
    from exitkit.verdict import Result

    who = Declared(spec="m:A", name="agent\n## forged | row", limits=frozenset({"max_turns"}))
    result = Result(case="tool_error", adapter=who.name, verdict="fail", summary=f"sent {HOSTILE}",
                    figures={"caller gets": HOSTILE, "requests": 2})
    text = markdown([who], [result], title="t", command="c", chart=None)
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert [len(_cells(r)) for r in rows] == [2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert not any(line.startswith("## forged") for line in text.splitlines())
    assert not re.search(r"(?<!\\)<img|(?<!\\)\]\(http|(?<!\\)`x", text)  # HTML, image, code: inert
    assert "`m:A`" in text  # the kit's own code span survives


def test_an_agent_name_with_dollar_signs_is_drawn_as_text_not_parsed_as_math(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from exitkit.report import chart
    from exitkit.verdict import Result

    figures = {"per run": [{"run": "plan, cap 20", "× bare httpx": 1.0}], "RSS × bare httpx": 1.1}
    results = [Result(case="overhead", adapter=name, verdict="pass", summary="1.0×", figures=figures)
               for name in ("agent $\\frac{1$ v2", "agent at $5")]
    assert chart(results, tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 0


def test_two_adapters_with_one_name_are_a_usage_error_not_one_row_hiding_the_other(
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "exitkit.adapters.plain:PlainLoop", "exitkit.adapters.plain:PlainLoop", "--only", "crash",
            "--out", "x"]
    assert main(argv) == 2
    assert "two adapters named 'plain openai loop'" in capsys.readouterr().err


def test_a_failed_case_in_pytest_shows_the_evidence_not_only_the_figures() -> None:
    from exitkit.pytest_plugin import failure_text
    from exitkit.verdict import Result

    said = {"status": 200, "reply": "I could not read the file, so I do not know."}
    result = Result(case="tool_error", adapter="a", verdict="fail", summary="no recovery · sent ''",
                    figures={"text sent back": ""}, evidence={"requests": [said]})
    text = failure_text(result)
    assert text.startswith("a · tool_error: FAIL · no recovery · sent ''")
    assert '"text sent back": ""' in text
    assert "I could not read the file, so I do not know." in text


def test_report_json_gives_every_adapter_the_same_figure_keys_per_case_as_documented() -> None:
    from exitkit.contract import Declared
    from exitkit.report import to_json
    from exitkit.verdict import Result

    a, b = Declared(spec="m:A", name="a"), Declared(spec="m:B", name="b")
    results = [Result(case="approval", adapter="a", verdict="none exists", summary="none exists",
                      figures={"limit": "none exists"}),
               Result(case="approval", adapter="b", verdict="pass", summary="ok",
                      figures={"deletions after approval": 1, "resumed": "completed"})]
    figures = [r["figures"] for r in to_json([a, b], results)["results"]]
    assert [list(f) for f in figures] == [["limit", "deletions after approval", "resumed"]] * 2
    assert figures[0] == {"limit": "none exists", "deletions after approval": None, "resumed": None}
    assert [r.figures for r in results][0] == {"limit": "none exists"}  # the results themselves untouched


def test_a_lone_surrogate_an_agent_sent_as_a_json_escape_does_not_lose_the_card(tmp_path: Path) -> None:
    # `"\ud800"` is valid JSON (a command's outcome line, a child's result) but no UTF-8 can hold it.
    from exitkit.contract import Declared
    from exitkit.report import write
    from exitkit.verdict import Result

    name, said = json.loads('"agent \\ud800"'), json.loads('"done \\udfff"')
    who = Declared(spec="m:A", name=name, limits=frozenset({"max_turns"}))
    figures = {"caller gets": said, "per run": [{"run": "plan", "× bare httpx": 1.0}],
               "RSS × bare httpx": 1.0}
    results = [Result(case=case, adapter=name, verdict="pass", summary=said, figures=figures)
               for case in ("turn_cap", "overhead")]
    write([who], results, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["adapters"][0]["name"] == name and data["results"][0]["figures"]["caller gets"] == said
    card = (tmp_path / "report.md").read_text()
    assert "agent \\\\ud800" in card and "done \\\\udfff" in card
