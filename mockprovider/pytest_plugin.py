"""The `mock_llm` pytest fixture, for other people's test suites.

Installing this package registers the plugin (the `pytest11` entry point), so any test may ask
for `mock_llm`: a fresh mock on an ephemeral loopback port for that one test, serving the
built-in scenarios plus any scenario files, and a journal of every request it received.

    @pytest.mark.mock_llm(scenarios=["weather.json"])   # relative to the test file's folder
    def test_my_agent(mock_llm):
        client = OpenAI(base_url=mock_llm.base_url, api_key="test")
        ...
        assert mock_llm.journal[-1].body["messages"][-1]["role"] == "tool"

The marker's other keywords go to `mockprovider.create_app` (`latency_ms`, `api_key`,
`journal` for another capacity, ...).
A test module can instead override the `mock_llm_scenarios` fixture. A bad scenario file fails
the test's setup with the loader's one-line message.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mockprovider.journal import Entry, Journal

JOURNAL_CAPACITY = 10_000


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mock_llm(scenarios=[...], **create_app_options): scenario files (paths relative to the test "
        "file, or dicts) and server options for the mock_llm fixture",
    )


@dataclass(frozen=True, kw_only=True)
class MockLLM:
    """A running mock, for one test."""

    base_url: str
    """`http://127.0.0.1:PORT/v1`: give it to `OpenAI(base_url=...)` or your agent's config."""
    buffer: Journal
    """The server's own journal (bounded at JOURNAL_CAPACITY); `journal` reads a snapshot."""

    @property
    def journal(self) -> list[Entry]:
        """The requests received so far, oldest first; each has `.body` (parsed), `.headers`, `.path`."""
        return self.buffer.entries()

    def bodies(self) -> list[Any]:
        """Just the parsed request bodies, oldest first."""
        return [entry.body for entry in self.journal]


@pytest.fixture
def mock_llm_scenarios(request: pytest.FixtureRequest) -> list[Any]:
    """The scenario files for `mock_llm`: from the `mock_llm` marker, else none. Override freely."""
    marker = request.node.get_closest_marker("mock_llm")
    sources = list(marker.kwargs.get("scenarios", ())) if marker else []
    folder = request.path.parent
    return [s if isinstance(s, dict) or Path(s).is_absolute() else folder / s for s in sources]


@pytest.fixture
def mock_llm(request: pytest.FixtureRequest, mock_llm_scenarios: list[Any]) -> Iterator[MockLLM]:
    """A fresh mock on an ephemeral loopback port, stopped when the test ends."""
    from mockprovider.app import create_app
    from mockprovider.scenario_files import ScenarioFileError
    from mockprovider.server import serve_in_thread

    marker = request.node.get_closest_marker("mock_llm")
    options = {k: v for k, v in (marker.kwargs if marker else {}).items() if k != "scenarios"}
    # A misspelt option would otherwise fail as create_app's TypeError, with a traceback.
    allowed = [name for name in inspect.signature(create_app).parameters if name != "scenario_files"]
    for name in options:
        if name not in allowed:
            pytest.fail(f"mock_llm: unknown marker option {name!r}; expected scenarios= or one of: "
                        f"{', '.join(allowed)}", pytrace=False)
    options = {"journal": JOURNAL_CAPACITY, **options}
    if not isinstance(options["journal"], int) or options["journal"] < 1:
        pytest.fail(f"mock_llm: journal= must be a capacity of at least 1, got {options['journal']!r}",
                    pytrace=False)
    try:
        app = create_app(scenario_files=mock_llm_scenarios, **options)
    except ScenarioFileError as e:
        pytest.fail(f"mock_llm: {e}", pytrace=False)
    with serve_in_thread(app) as base_url:
        yield MockLLM(base_url=base_url, buffer=app.state.config.journal)
