"""The `mock_llm` pytest fixtures, for other people's test suites.

Installing this package registers the plugin (the `pytest11` entry point), so any test may ask
for one of three fixtures (docs/scenarios.md has the full API):

- `mock_llm`: a fresh mock on an ephemeral loopback port for that one test, serving the built-in
  scenarios plus the scenario files of the test's `mock_llm` marker, with a journal of every
  request it received.
- `mock_llm_session`: one mock for the whole session, started once.
- `mock_llm_shared`: that session's mock, set up for one test from its marker (scenario files and
  server options, applied without a restart), its journal cleared before the test and the
  session's set-up restored after it.

    @pytest.mark.mock_llm(scenarios=["weather.json"])   # relative to the test file's folder
    def test_my_agent(mock_llm):
        client = OpenAI(base_url=mock_llm.base_url, api_key="test")        # .../v1
        claude = Anthropic(base_url=mock_llm.root_url, api_key="test")      # no /v1
        ...
        assert mock_llm.requests(turn=1)[0].body["messages"][-1]["role"] == "tool"

The marker's other keywords go to `mockprovider.create_app` (`latency_ms`, `api_key`,
`journal` for another capacity, ...). A test module can instead override the
`mock_llm_scenarios` fixture. A bad scenario file fails the test's setup with the loader's
one-line message.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from mockprovider.journal import Entry, Journal
    from mockprovider.mcp.calls import ToolCall

JOURNAL_CAPACITY = 10_000
_OPTIONS_PREFIX = re.compile(r"^/o/[^/]*")
_GEMINI_PATH = re.compile(r"^/v1(?:beta)?/models/[^/]+:")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mock_llm(scenarios=[...], **create_app_options): scenario files (paths relative to the test "
        "file, or dicts) and server options for the mock_llm and mock_llm_shared fixtures",
    )


def plain_path(path: str) -> str:
    """A request path without its `/o/{options}` prefix: `/o/latency=5/v1/messages` → `/v1/messages`."""
    return _OPTIONS_PREFIX.sub("", path)


def turn_of(path: str, body: Any) -> int | None:
    """The turn a journalled request asked for (its assistant messages, as the scenarios count
    them) in whichever wire format it came; None for a body that format would refuse."""
    from mockprovider.apis import anthropic as anthropic_api
    from mockprovider.apis import gemini_request
    from mockprovider.apis import responses as responses_api
    from mockprovider.errors import APIError

    path = plain_path(path)
    try:
        if path == "/v1/responses":
            messages = responses_api.responses_request(body).chat.messages
        elif path == "/v1/messages":
            messages = anthropic_api.messages_request(body).messages
        elif _GEMINI_PATH.match(path) and isinstance(body, dict):  # the model's turns: role "model"
            messages = gemini_request.contents_messages(body.get("contents"))
        else:
            messages = body.get("messages") if isinstance(body, dict) else None
    except APIError:
        return None
    if not isinstance(messages, list):
        return None
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


@dataclass(frozen=True, kw_only=True)
class MockLLM:
    """A running mock."""

    base_url: str
    """`http://127.0.0.1:PORT/v1`: for `OpenAI(base_url=...)` or your agent's config."""
    root_url: str
    """`http://127.0.0.1:PORT`: for clients that add `/v1` themselves, as `Anthropic(base_url=...)` does."""
    buffer: Journal
    """The server's own journal (bounded at JOURNAL_CAPACITY); `journal` reads a snapshot."""
    app: Starlette
    """The served app; `configure` swaps its settings between requests."""

    @property
    def mcp_url(self) -> str:
        """`http://127.0.0.1:PORT/mcp`: the scripted MCP server (Streamable HTTP) of every scenario
        file's tools; `mcp_url + "/NAME"` serves only scenario NAME's (docs/mcp.md)."""
        return f"{self.root_url}/mcp"

    def tool_calls(self, name: str | None = None) -> list[ToolCall]:
        """The MCP `tools/call`s received so far, oldest first (only `name`'s when given), each
        with its arguments, session, answer, progress and `outcome` (docs/mcp.md)."""
        from mockprovider.mcp.calls import tool_calls

        return tool_calls(self.journal, name)

    @property
    def journal(self) -> list[Entry]:
        """The requests received so far, oldest first; each has `.body` (parsed), `.headers`, `.path`."""
        return self.buffer.entries()

    def requests(self, *, turn: int | None = None, path: str | None = None) -> list[Entry]:
        """The journal's requests, oldest first, only those of `turn` (0-based: the number of
        assistant messages the request carried) and `path` (`/v1/chat/completions`, `/v1/responses`,
        `/v1/messages`; an `/o/{options}` prefix is ignored), when given."""
        entries = self.journal
        if path is not None:
            entries = [e for e in entries if plain_path(e.path) == plain_path(path)]
        if turn is not None:
            entries = [e for e in entries if turn_of(e.path, e.body) == turn]
        return entries

    def bodies(self, *, turn: int | None = None, path: str | None = None) -> list[Any]:
        """The parsed JSON bodies of `requests(turn=..., path=...)`, oldest first."""
        return [entry.body for entry in self.requests(turn=turn, path=path)]

    def clear(self) -> None:
        """Forget every request journalled so far."""
        self.buffer.clear()

    def configure(self, *, scenarios: Sequence[Any] = (), **options: Any) -> None:
        """Serve `scenarios` (files, folders or dicts) with `options` (as `create_app` takes them)
        from the next request on, without a restart; the journal is kept."""
        from mockprovider.app import create_app

        _check_options(options)
        if "journal" in options:
            pytest.fail("mock_llm: configure() keeps the journal, whose capacity is set when the mock "
                        "starts (journal= on a mock_llm test's marker)", pytrace=False)
        fresh = create_app(scenario_files=scenarios, **{**options, "journal": 0})
        self.app.state.config = replace(fresh.state.config, journal=self.buffer)


def _check_options(options: dict[str, Any]) -> None:
    from mockprovider.app import create_app

    # A misspelt option would otherwise fail as create_app's TypeError, with a traceback.
    allowed = [name for name in inspect.signature(create_app).parameters if name != "scenario_files"]
    for name in options:
        if name not in allowed:
            pytest.fail(f"mock_llm: unknown marker option {name!r}; expected scenarios= or one of: "
                        f"{', '.join(allowed)}", pytrace=False)
    journal = options.get("journal", JOURNAL_CAPACITY)
    if not isinstance(journal, int) or journal < 1:
        pytest.fail(f"mock_llm: journal= must be a capacity of at least 1, got {journal!r}", pytrace=False)


def _marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("mock_llm")
    return {k: v for k, v in (marker.kwargs if marker else {}).items() if k != "scenarios"}


@pytest.fixture
def mock_llm_scenarios(request: pytest.FixtureRequest) -> list[Any]:
    """The scenario files for `mock_llm`: from the `mock_llm` marker, else none. Override freely."""
    marker = request.node.get_closest_marker("mock_llm")
    sources = list(marker.kwargs.get("scenarios", ())) if marker else []
    folder = request.path.parent
    return [s if isinstance(s, dict) or Path(s).is_absolute() else folder / s for s in sources]


def _started(scenarios: Sequence[Any], options: dict[str, Any]) -> Iterator[MockLLM]:
    from mockprovider.app import create_app
    from mockprovider.scripts.files import ScenarioFileError
    from mockprovider.server import serve_in_thread

    _check_options(options)
    try:
        app = create_app(scenario_files=scenarios, **{"journal": JOURNAL_CAPACITY, **options})
    except ScenarioFileError as e:
        pytest.fail(f"mock_llm: {e}", pytrace=False)
    with serve_in_thread(app) as base_url:
        yield MockLLM(base_url=base_url, root_url=base_url.removesuffix("/v1"),
                      buffer=app.state.config.journal, app=app)


@pytest.fixture
def mock_llm(request: pytest.FixtureRequest, mock_llm_scenarios: list[Any]) -> Iterator[MockLLM]:
    """A fresh mock on an ephemeral loopback port, stopped when the test ends."""
    yield from _started(mock_llm_scenarios, _marker_options(request))


@pytest.fixture(scope="session")
def mock_llm_session() -> Iterator[MockLLM]:
    """One mock for the whole session (built-in scenarios; `configure` or `mock_llm_shared` add
    files), stopped when the session ends."""
    yield from _started((), {})


@pytest.fixture
def mock_llm_shared(
    request: pytest.FixtureRequest, mock_llm_session: MockLLM, mock_llm_scenarios: list[Any]
) -> Iterator[MockLLM]:
    """The session's mock, serving this test's marker scenarios and options, with an empty journal."""
    from mockprovider.scripts.files import ScenarioFileError

    before = mock_llm_session.app.state.config
    options = _marker_options(request)
    options.pop("journal", None)  # the session's journal stays: its capacity was set at start
    try:
        mock_llm_session.configure(scenarios=mock_llm_scenarios, **options)
    except ScenarioFileError as e:
        pytest.fail(f"mock_llm: {e}", pytrace=False)
    mock_llm_session.clear()
    try:
        yield mock_llm_session
    finally:
        mock_llm_session.app.state.config = before
