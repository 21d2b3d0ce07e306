"""The `mock_llm` pytest fixtures, for other people's test suites.

Installing this package registers the plugin (the `pytest11` entry point), so any test may ask
for one of three fixtures (docs/scenarios.md has the full API):

- `mock_llm`: a fresh mock on an ephemeral loopback port for that one test, serving the built-in
  scenarios plus the scenario files of the test's `mock_llm` marker, with a journal of every
  request it received.
- `mock_llm_session`: one mock for the whole session, started once; or, with `--mock-llm-url`
  (`MOCK_LLM_URL`), a mock started outside the run and shared by every pytest-xdist worker.
- `mock_llm_shared`: that session's mock, set up for one test from its marker (scenario files and
  server options, applied without a restart) and seen through this test's id (`x-test-id`, in
  its URLs as `/o/test=ID`): its journal, counted attempts and set-up are this test's alone, so
  tests sharing one mock may run at once.

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

import hashlib
import inspect
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from mockprovider.journal import Entry, Journal
    from mockprovider.mcp.calls import ToolCall
    from mockprovider.shared_mock import RemoteJournal

JOURNAL_CAPACITY = 10_000
_GEMINI_PATH = re.compile(r"^/v1(?:beta)?/models/[^/]+:")
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9._-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mock_llm")
    group.addoption(
        "--llm-record-mode", default=None, metavar="none|once|new_episodes|all",
        help="how tests marked mock_llm(record=...) use their cassettes (vcrpy's modes; default: the "
        "marker's, else none: replay only, nothing reaches a network)",
    )
    group.addoption(
        "--mock-llm-url", default=None, metavar="URL",
        help="a mock started outside the run (with --journal N), shared by every worker: "
        "mock_llm_session and mock_llm_shared use it (default: $MOCK_LLM_URL, else one in-process)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mock_llm(scenarios=[...], record=None, upstream=None, **create_app_options): scenario files "
        "(paths relative to the test file, or dicts) and server options for the mock_llm and "
        "mock_llm_shared fixtures; record=True or a record mode replays (or records) the test's "
        "cassette instead, cassettes/<module>/<test>.json beside the test file",
    )
    given = config.getoption("--llm-record-mode", default=None)
    if given is not None:
        from mockprovider.cassettes import record_mode

        try:
            record_mode(given)
        except ValueError as e:
            raise pytest.UsageError(f"--llm-record-mode: {e}") from None


def turn_of(path: str, body: Any, betas: str = "") -> int | None:
    """The turn a journalled request asked for (its assistant messages, as the scenarios count
    them) in whichever wire format it came; None for a body that format would refuse (`betas`:
    its `anthropic-beta` header, under which Messages takes more)."""
    from mockprovider.apis import anthropic as anthropic_api
    from mockprovider.apis import gemini_request
    from mockprovider.apis import responses as responses_api
    from mockprovider.errors import APIError
    from mockprovider.journal import plain_path

    path = plain_path(path)
    try:
        if path == "/v1/responses":
            messages = responses_api.responses_request(body).chat.messages
        elif path == "/v1/messages":
            messages = anthropic_api.messages_request(body, betas=betas).messages
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
    buffer: Journal | RemoteJournal
    """The server's own journal (bounded at JOURNAL_CAPACITY); `journal` reads a snapshot."""
    app: Starlette | None
    """The served app; `configure` swaps its settings between requests. None for a mock in another
    process (`--mock-llm-url`), which serves what it was started with."""
    test_id: str | None = None
    """On a shared mock, this test's id: the URLs above carry it (`/o/test=ID`), and the journal,
    the counted attempts and `configure` are this test's alone."""
    cassette: Path | None = None
    """The test's cassette, when it replays or records one (`record=` on the marker): the app is
    then the recording proxy, and the journal holds every request it received."""

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
        """The requests received so far (this test's, on a shared mock), oldest first; each has
        `.body` (parsed), `.headers`, `.path`, `.test_id`."""
        return self.buffer.entries(test_id=self.test_id)

    def requests(self, *, turn: int | None = None, path: str | None = None) -> list[Entry]:
        """The journal's requests, oldest first, only those of `turn` (0-based: the number of
        assistant messages the request carried) and `path` (`/v1/chat/completions`, `/v1/responses`,
        `/v1/messages`, a Gemini method under `/v1beta/` or `/v1/` alike, `/api/chat`; an
        `/o/{options}` prefix is ignored), when given."""
        from mockprovider.journal import same_route

        entries = self.journal
        if path is not None:
            entries = [e for e in entries if same_route(e.path) == same_route(path)]
        if turn is not None:
            entries = [e for e in entries
                       if turn_of(e.path, e.body, e.headers.get("anthropic-beta", "")) == turn]
        return entries

    def bodies(self, *, turn: int | None = None, path: str | None = None) -> list[Any]:
        """The parsed JSON bodies of `requests(turn=..., path=...)`, oldest first."""
        return [entry.body for entry in self.requests(turn=turn, path=path)]

    def clear(self) -> None:
        """Forget every request journalled so far (this test's, on a shared mock)."""
        self.buffer.clear(test_id=self.test_id)

    def configure(self, *, scenarios: Sequence[Any] = (), **options: Any) -> None:
        """Serve `scenarios` (files, folders or dicts; a relative path is read from the folder of
        the file that calls this, as the marker's are from the test file's) with `options` (as
        `create_app` takes them) from the next request on, without a restart; the journal is kept.
        On a shared mock, only this test's requests see them."""
        from mockprovider.app import create_app

        if self.cassette is not None:
            pytest.fail(f"mock_llm: configure() cannot change a cassette's replies ({self.cassette}); "
                        "a test replays its cassette or runs scenarios, not both", pytrace=False)
        _check_options(options)
        if "journal" in options:
            pytest.fail("mock_llm: configure() keeps the journal, whose capacity is set when the mock "
                        "starts (journal= on a mock_llm test's marker)", pytrace=False)
        if self.app is None:
            if scenarios or options:
                pytest.fail(f"mock_llm: the shared mock at {self.root_url} serves the scenario files it was "
                            "started with (--scenarios); per-request options go in the model name or the "
                            "base URL", pytrace=False)
            return
        caller = Path(sys._getframe(1).f_code.co_filename).parent
        fresh = create_app(scenario_files=_against(caller, scenarios), **{**options, "journal": 0})
        config = replace(fresh.state.config, journal=self.buffer)
        if self.test_id is None:
            self.app.state.config = config
        else:
            self.app.state.tests[self.test_id] = config

    def for_test(self, test_id: str) -> MockLLM:
        """This mock as one test sees it: URLs that carry `test_id` (`/o/test=ID`), and the
        journal, counted attempts and `configure` of that test alone."""
        root = self.root_url.split("/o/", 1)[0]
        return replace(self, test_id=test_id, root_url=f"{root}/o/test={test_id}",
                       base_url=f"{root}/o/test={test_id}/v1")

    def forget_test(self) -> None:
        """Drop what `configure` set up for this test on a shared mock (its journal stays)."""
        if self.test_id is not None and self.app is not None:
            self.app.state.tests.pop(self.test_id, None)


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
    return {k: v for k, v in (marker.kwargs if marker else {}).items() if k not in _NOT_SERVER_OPTIONS}


_NOT_SERVER_OPTIONS = ("scenarios", "record", "upstream")


def _against(folder: Path, sources: Sequence[Any]) -> list[Any]:
    """Relative scenario paths as read from `folder`; dicts and absolute paths as they are."""
    return [s if isinstance(s, dict) or Path(s).is_absolute() else folder / s for s in sources]


@pytest.fixture
def mock_llm_scenarios(request: pytest.FixtureRequest) -> list[Any]:
    """The scenario files for `mock_llm`: from the `mock_llm` marker, else none. Override freely."""
    marker = request.node.get_closest_marker("mock_llm")
    return _against(request.path.parent, list(marker.kwargs.get("scenarios", ())) if marker else [])


def test_id_of(request: pytest.FixtureRequest) -> str:
    """An id for this test on a shared mock, unique across pytest-xdist workers: the worker, the
    test's name (as far as the header allows) and a digest of its node id."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    digest = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]
    return f"{worker}-{_NOT_IN_ID.sub('_', request.node.name)[:120]}-{digest}"


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
    """A fresh mock on an ephemeral loopback port, stopped when the test ends; with `record=` on
    the marker, the test's cassette served by the recording proxy instead."""
    marker = request.node.get_closest_marker("mock_llm")
    if marker is not None and marker.kwargs.get("record") not in (None, False):
        yield from _on_cassette(request, marker.kwargs, mock_llm_scenarios)
    else:
        yield from _started(mock_llm_scenarios, _marker_options(request))


def _on_cassette(request: pytest.FixtureRequest, kwargs: dict[str, Any], scenarios: list[Any]
                 ) -> Iterator[MockLLM]:
    from mockprovider.cassettes import UPSTREAM_ENV, Cassette, cassette_path, record_mode, recorder_for
    from mockprovider.journal import Journal
    from mockprovider.recorder.cli import RELAY
    from mockprovider.server import serve_in_thread

    others = sorted(set(kwargs) - {"record", "upstream", "journal"})
    if others or scenarios:
        pytest.fail(f"mock_llm: record= replays the test's cassette; {', '.join(others) or 'scenarios'} "
                    "do not apply to it", pytrace=False)
    given = kwargs["record"]
    mode = request.config.getoption("--llm-record-mode") or ("none" if given is True else given)
    try:
        test = request.node.nodeid.split("::", 1)[-1].replace("::", ".")  # a class's name kept: Class.test
        cassette = Cassette(path=cassette_path(request.path, test), mode=record_mode(mode),
                            upstream=kwargs.get("upstream") or os.environ.get(UPSTREAM_ENV))
        journal = Journal(kwargs.get("journal", JOURNAL_CAPACITY))
        app = recorder_for(cassette, journal)
    except ValueError as e:
        pytest.fail(f"mock_llm: {e}", pytrace=False)
    with serve_in_thread(app, uvicorn_options=RELAY) as base_url:
        yield MockLLM(base_url=base_url, root_url=base_url.removesuffix("/v1"), buffer=journal, app=app,
                      cassette=cassette.path)
    misses = app.state.recorder.misses
    if misses:
        more = f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""
        pytest.fail(f"mock_llm: {len(misses)} request(s) not in the cassette {cassette.path} (record mode "
                    f"{cassette.mode}): {misses[0]}{more}", pytrace=False)


@pytest.fixture(scope="session")
def mock_llm_session(request: pytest.FixtureRequest) -> Iterator[MockLLM]:
    """One mock for the whole session (built-in scenarios; `configure` or `mock_llm_shared` add
    files), stopped when the session ends; or the mock at `--mock-llm-url`, shared by every worker."""
    from mockprovider.shared_mock import URL_ENV

    url = request.config.getoption("--mock-llm-url", default=None) or os.environ.get(URL_ENV)
    if url:
        yield _shared_at(url)
    else:
        yield from _started((), {})


def _shared_at(url: str) -> MockLLM:
    from mockprovider.shared_mock import RemoteJournal, SharedMockError, check_ready, root_of

    root = root_of(url)
    try:
        check_ready(root)
        journal = RemoteJournal(root)
    except SharedMockError as e:
        pytest.fail(f"mock_llm: {e}", pytrace=False)
    return MockLLM(base_url=f"{root}/v1", root_url=root, buffer=journal, app=None)


@pytest.fixture
def mock_llm_shared(
    request: pytest.FixtureRequest, mock_llm_session: MockLLM, mock_llm_scenarios: list[Any]
) -> Iterator[MockLLM]:
    """The session's mock, serving this test's marker scenarios and options, with an empty journal."""
    from mockprovider.scripts.files import ScenarioFileError

    mine = mock_llm_session.for_test(test_id_of(request))
    options = _marker_options(request)
    options.pop("journal", None)  # the session's journal stays: its capacity was set at start
    try:
        mine.configure(scenarios=mock_llm_scenarios, **options)
    except ScenarioFileError as e:
        pytest.fail(f"mock_llm: {e}", pytrace=False)
    try:
        yield mine
    finally:
        mine.forget_test()
        mine.clear()
