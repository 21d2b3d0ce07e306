"""One scenario file named twice, by different spellings of its path, is loaded once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mockprovider.scripts.files import ScenarioFileError, load_scenarios

WEATHER = {"name": "weather", "turns": [{"content": "Sunny."}]}


@pytest.fixture
def weather(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "weather.json"
    path.write_text(json.dumps(WEATHER))
    return path


def test_two_spellings_of_one_path_load_the_scenario_once(weather: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(weather.parent)
    spellings = [str(weather), "weather.json", "./weather.json", "sub/../weather.json",
                 f"{weather.parent}//weather.json"]
    assert list(load_scenarios(spellings)) == ["weather"]


def test_a_file_named_alone_and_in_its_folder_loads_once(weather: Path):
    assert list(load_scenarios([weather, weather.parent])) == ["weather"]


def test_a_symlink_to_a_named_file_is_the_same_file(weather: Path):
    link = weather.parent / "sub" / "linked.json"
    os.symlink(weather, link)
    assert list(load_scenarios([weather, link])) == ["weather"]


def test_two_different_files_with_one_name_are_still_refused(weather: Path):
    other = weather.parent / "sub" / "weather.json"
    other.write_text(json.dumps(WEATHER))
    with pytest.raises(ScenarioFileError, match=r"the name 'weather' is already used by .*weather\.json"):
        load_scenarios([weather, other])
