"""docs/mcp.md, run as written: its five-minute example passes in a fresh folder, and every
scenario it shows loads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_pytest_plugin import SAVED_AS, run_pytest_in_process

from mockprovider.scripts.files import load_scenarios

DOCS = Path(__file__).resolve().parents[3] / "docs" / "mcp.md"


def test_the_five_minute_example_passes_as_written_in_a_fresh_folder(pytester: pytest.Pytester):
    files = dict(SAVED_AS.findall(DOCS.read_text()))
    assert set(files) == {"weather.json", "weather_agent.py", "test_weather_agent.py"}
    for name, body in files.items():
        (pytester.path / name).write_text(body)
    done = run_pytest_in_process(pytester)
    assert done.ret == 0, done.stdout.str() + done.stderr.str()
    assert "3 passed" in done.stdout.str()


@pytest.mark.parametrize("block", re.findall(r"```json\n(.*?)```", DOCS.read_text(), re.DOTALL))
def test_every_scenario_the_page_shows_loads(tmp_path: Path, block: str):
    path = tmp_path / "shown.json"
    path.write_text(block)
    (loaded,) = load_scenarios([path]).values()
    assert loaded.mcp is not None and json.loads(block)["mcp"]
