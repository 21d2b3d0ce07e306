"""docs/scenarios.md, run as written: its worked example passes in a fresh folder, and every
scenario and aimock file it shows loads (or is refused with the line it shows)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_pytest_plugin import SAVED_AS, run_pytest_in_process

from mockprovider.scripts.files import ScenarioFileError, load_scenarios

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scenarios.md"


def saved_files() -> dict[str, str]:
    return {name: body for name, body in SAVED_AS.findall(DOCS.read_text())}


def json_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.DOTALL)


def test_the_worked_example_passes_as_written_in_a_fresh_folder(pytester: pytest.Pytester):
    files = saved_files()
    assert set(files) == {"orders.json", "orders_agent.py", "test_orders_agent.py"}
    for name, body in files.items():
        (pytester.path / name).write_text(body)
    done = run_pytest_in_process(pytester)
    assert done.ret == 0, done.stdout.str() + done.stderr.str()
    assert "4 passed" in done.stdout.str()


@pytest.mark.parametrize("block", json_blocks())
def test_every_scenario_the_docs_show_loads(tmp_path: Path, block: str):
    path = tmp_path / "shown.json"
    path.write_text(block)
    assert len(load_scenarios([path])) == 1


def test_the_aimock_refusal_shown_is_what_the_loader_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    Path("jokes.json").write_text(json.dumps({"fixtures": [{
        "match": {"userMessage": "tell me a joke", "sequenceIndex": 0}, "response": {"content": "Why?"}}]}))
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios(["jokes.json"])
    shown = re.search(r"```text\n(mockprovider: jokes\.json: .*)\n```", DOCS.read_text())
    assert shown is not None
    assert shown[1] == f"mockprovider: {caught.value}"
