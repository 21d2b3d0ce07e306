"""The `mock_llm` fixture, used as other people use it: from a fresh folder, by a nested pytest.

The README's agent and its test, and docs/scenarios.md's scenario file, are copied out of the
pages themselves, so the documentation cannot drift from what works. The README's test runs in a
fresh interpreter (the installed entry point, as a user meets it); the other nested runs share
this process through `pytester`, which loads the same entry points into a fresh session.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from mockprovider.scripts.files import ScenarioFileError, load_scenarios

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SCENARIOS_PAGE = ROOT / "docs" / "scenarios.md"
SAVED_AS = re.compile(r"save as `([^`]+)`[^\n]*\n\n```\w+\n(.*?)```", re.IGNORECASE | re.DOTALL)


def readme_files() -> dict[str, str]:
    """Every code block the README tells the reader to save, by file name."""
    return {name: body for name, body in SAVED_AS.findall(README.read_text())}


def run_pytest(folder: Path) -> subprocess.CompletedProcess[str]:
    """`python -m pytest` in `folder`, as a user would run it: no conftest, only installed plugins."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=180,
    )


def run_pytest_in_process(pytester: pytest.Pytester) -> pytest.RunResult:
    """A nested `pytest -q` session over `pytester.path`, loading the installed plugins, in this process."""
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")


def test_the_plugin_is_registered_through_the_pytest11_entry_point():
    plugins = {e.name: e.value for e in entry_points(group="pytest11")}
    assert plugins.get("mockprovider") == "mockprovider.pytest_plugin"


def test_the_readme_agent_and_its_test_pass_as_written_in_a_fresh_folder(tmp_path: Path):
    files = readme_files()
    assert set(files) == {"test_agent.py"}
    (tmp_path / "test_agent.py").write_text(files["test_agent.py"])
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def docs_block(lang: str) -> str:
    found = re.search(rf"```{lang}\n(.*?)```", SCENARIOS_PAGE.read_text(), re.S)
    assert found, f"docs/scenarios.md shows no {lang} block"
    return found[1]


def test_the_docs_toml_scenario_is_the_json_one(tmp_path: Path):
    (tmp_path / "weather.json").write_text(docs_block("json"))
    (tmp_path / "weather.toml").write_text(docs_block("toml"))
    from_json = load_scenarios([tmp_path / "weather.json"])["weather"]
    from_toml = load_scenarios([tmp_path / "weather.toml"])["weather"]
    assert (from_toml.turns, from_toml.options, from_toml.__doc__) == (
        from_json.turns, from_json.options, from_json.__doc__)


def test_the_docs_error_line_is_what_the_loader_says(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broken = docs_block("json").replace('"tool_result_contains"', '"tool_result_contain"')
    Path("weather.json").write_text(broken)
    with pytest.raises(ScenarioFileError) as caught:
        load_scenarios(["weather.json"])
    shown = re.search(r"```text\n(mockprovider: .*)\n```", SCENARIOS_PAGE.read_text())
    assert shown is not None
    assert shown[1] == f"mockprovider: {caught.value}"[: len(shown[1].removesuffix("..."))] + (
        "..." if shown[1].endswith("...") else "")


EDGE_CASES = '''
import httpx
import pytest
from openai import AuthenticationError, OpenAI

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.mock_llm(scenarios=[{"name": "inline", "turns": [{"content": "hello"}]}], api_key="k")
def test_inline_scenarios_and_server_options(mock_llm):
    client = OpenAI(base_url=mock_llm.base_url, api_key="k")
    assert client.chat.completions.create(model="inline", messages=HI).choices[0].message.content == "hello"
    with pytest.raises(AuthenticationError):
        OpenAI(base_url=mock_llm.base_url, api_key="wrong", max_retries=0).models.list()
    assert [e.headers["authorization"] for e in mock_llm.journal] == ["Bearer k"]


def test_each_test_gets_a_fresh_server_and_journal(mock_llm):
    assert mock_llm.journal == []
    httpx.post(f"{mock_llm.base_url}/chat/completions", json={"model": "plan", "messages": HI})
    assert mock_llm.bodies() == [{"model": "plan", "messages": HI}]


@pytest.mark.mock_llm(scenarios=["bad.json"])
def test_a_bad_file_fails_the_setup(mock_llm):
    pass


@pytest.mark.mock_llm(journal=1)
def test_the_journal_capacity_is_an_option_too(mock_llm):
    for word in ("one", "two"):
        httpx.post(f"{mock_llm.base_url}/chat/completions",
                   json={"model": "plan", "messages": [{"role": "user", "content": word}]})
    assert [e.body["messages"][0]["content"] for e in mock_llm.journal] == ["two"]


@pytest.mark.mock_llm(latncy_ms=5)
def test_a_misspelt_option_fails_the_setup(mock_llm):
    pass
'''

OVERRIDE = '''
import pytest
from openai import OpenAI


@pytest.fixture
def mock_llm_scenarios(tmp_path):
    path = tmp_path / "made.json"
    path.write_text('{"turns": [{"tool_calls": [{"name": "search_tickets", "arguments": {"q": "x"}}]}]}')
    return [path]


def test_a_module_can_supply_its_own_scenarios(mock_llm):
    reply = OpenAI(base_url=mock_llm.base_url, api_key="t").chat.completions.create(
        model="made", messages=[{"role": "user", "content": "find"}],
        tools=[{"type": "function", "function": {"name": "search_tickets"}}])
    assert reply.choices[0].message.tool_calls[0].function.name == "search_tickets"
'''


def test_the_fixture_takes_dicts_options_overrides_and_fails_bad_files_cleanly(pytester: pytest.Pytester):
    folder = pytester.path
    (folder / "test_edges.py").write_text(textwrap.dedent(EDGE_CASES))
    (folder / "test_override.py").write_text(textwrap.dedent(OVERRIDE))
    (folder / "bad.json").write_text('{"name": "bad", "turns": []}')
    done = run_pytest_in_process(pytester)
    output = done.stdout.str() + done.stderr.str()
    assert re.search(r"\b4 passed, 2 errors\b", output), output
    assert f"mock_llm: {folder / 'bad.json'}: $.turns: expected at least one of turns" in output
    assert "mock_llm: unknown marker option 'latncy_ms'" in output
    # One-line failures, not the loader's or create_app's traceback.
    assert "ScenarioFileError" not in output and "TypeError" not in output
