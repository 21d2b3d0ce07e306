"""A cassette per test, the pytest way: a suite marked `mock_llm(record=True)` records its model
through openai, anthropic, google-genai and ollama once, then replays offline in `none` mode,
the default; a request the cassette lacks fails the test, naming it.

The "real model" is a second mock on loopback; the suite runs in a nested pytest session, as a
user's would, with the plugin's command-line option and environment variable.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import anthropic  # noqa: F401 - imported once here, the nested sessions reuse them
import ollama  # noqa: F401
import openai
import pytest
from google import genai  # noqa: F401

from mockprovider.cassettes import cassette_path
from mockprovider.server import serve_in_thread

SUITE = textwrap.dedent('''
    import anthropic
    import ollama
    import openai
    import pytest
    from google import genai
    from google.genai import types

    TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
             for name in ("list_files", "read_file")]
    OFFER = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(name="list_files")])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    QUESTION = "QUESTION_TEXT"


    def ask(text):
        return [{"role": "user", "content": f"{QUESTION} ({text})"}]


    def names(calls):
        return [c.function.name for c in calls or ()]


    @pytest.mark.mock_llm(record=True)
    def test_four_clients_meet_the_same_model(mock_llm):
        with openai.OpenAI(base_url=mock_llm.base_url, api_key="sk-openai-SECRET") as chat:
            first = chat.chat.completions.create(model="plan", messages=ask("chat"), tools=TOOLS)
            call = first.choices[0].message.tool_calls[0]
            history = [*ask("chat"), first.choices[0].message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": call.id, "content": "errors.log"}]
            second = chat.chat.completions.create(model="plan", messages=history, tools=TOOLS, stream=True)
            streamed = [n for c in second if c.choices for n in names(c.choices[0].delta.tool_calls) if n]
        assert call.function.name == "list_files" and streamed == ["read_file"]
        with anthropic.Anthropic(base_url=mock_llm.root_url, api_key="sk-ant-SECRET") as claude:
            tools = [{"name": "list_files", "input_schema": {"type": "object"}}]
            with claude.messages.stream(model="plan", max_tokens=200, messages=ask("messages"),
                                        tools=tools) as s:
                assert s.get_final_message().content[-1].name == "list_files"
        options = types.HttpOptions(base_url=mock_llm.root_url)
        gemini = genai.Client(api_key="AIza-SECRET", http_options=options)
        reply = gemini.models.generate_content(model="plan", contents=f"{QUESTION} (gemini)", config=OFFER)
        chunks = list(gemini.models.generate_content_stream(
            model="plan", contents=f"{QUESTION} (gemini stream)", config=OFFER))
        assert reply.function_calls[0].name == chunks[-1].function_calls[0].name == "list_files"
        with ollama.Client(host=mock_llm.root_url) as local:
            said = local.chat(model="plan", messages=ask("ollama"), tools=TOOLS)
            parts = list(local.chat(model="plan", messages=ask("ollama stream"), tools=TOOLS, stream=True))
        assert names(said.message.tool_calls) == [n for p in parts for n in names(p.message.tool_calls)]
        assert names(said.message.tool_calls) == ["list_files"]
        assert len(mock_llm.journal) == 7
''')
QUESTION = "Which file mentions a timeout?"
CASSETTE = Path("cassettes") / "test_agent" / "test_four_clients_meet_the_same_model.json"


def _suite(pytester: pytest.Pytester, question: str = QUESTION) -> None:
    (pytester.path / "test_agent.py").write_text(SUITE.replace("QUESTION_TEXT", question))


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", *args)


@pytest.fixture
def recorded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The suite's cassette, recorded once from a loopback "real model" that is then stopped."""
    _suite(pytester)
    with serve_in_thread() as upstream:
        monkeypatch.setenv("MOCK_LLM_UPSTREAM", upstream.replace("http://", "http://me:pw-SECRET@"))
        _run(pytester, "--llm-record-mode=once").assert_outcomes(passed=1)
    monkeypatch.delenv("MOCK_LLM_UPSTREAM")
    return pytester.path / CASSETTE


@pytest.mark.slow
def test_a_cassette_recorded_through_four_clients_holds_every_turn_and_no_credential(recorded: Path):
    text = recorded.read_text()
    assert "SECRET" not in text
    document = json.loads(text)
    assert document["name"] == "test_four_clients_meet_the_same_model"
    asked = {alternative["if"]["user_contains"] for turn in document["turns"] for alternative in turn}
    assert asked == {f"{QUESTION} ({how})" for how in
                     ("chat", "messages", "gemini", "gemini stream", "ollama", "ollama stream")}
    assert "***" in document["description"]  # the upstream's password, masked


@pytest.mark.slow
def test_the_cassette_replays_offline_in_none_mode_the_default(pytester: pytest.Pytester, recorded: Path):
    before = recorded.read_bytes()
    _run(pytester).assert_outcomes(passed=1)  # no upstream anywhere: every reply from the cassette
    _run(pytester, "--llm-record-mode=none").assert_outcomes(passed=1)
    assert recorded.read_bytes() == before


@pytest.mark.slow
def test_a_request_the_cassette_lacks_fails_the_test_naming_it(pytester: pytest.Pytester, recorded: Path):
    _suite(pytester, "Which file mentions a crash?")
    done = _run(pytester)
    assert done.ret != 0
    output = done.stdout.str()
    assert "not in the cassette" in output and "Which file mentions a crash? (chat)" in output
    assert str(recorded) in output


@pytest.mark.slow
def test_new_episodes_records_what_the_cassette_lacks_and_keeps_the_rest(
        pytester: pytest.Pytester, recorded: Path, monkeypatch: pytest.MonkeyPatch):
    _suite(pytester, "Which file mentions a crash?")
    with serve_in_thread() as upstream:
        monkeypatch.setenv("MOCK_LLM_UPSTREAM", upstream)
        _run(pytester, "--llm-record-mode=new_episodes").assert_outcomes(passed=1)
    monkeypatch.delenv("MOCK_LLM_UPSTREAM")
    asked = {a["if"]["user_contains"] for turn in json.loads(recorded.read_text())["turns"] for a in turn}
    assert {f"{QUESTION} (chat)", "Which file mentions a crash? (chat)"} <= asked
    _run(pytester).assert_outcomes(passed=1)  # and replays offline
    _suite(pytester)
    _run(pytester).assert_outcomes(passed=1)


@pytest.mark.slow
def test_a_cassette_recorded_through_one_format_replays_through_another(recorded: Path):
    with serve_in_thread(scenario_files=[recorded]) as url, openai.OpenAI(base_url=url, api_key="t") as chat:
        reply = chat.chat.completions.create(
            model="test_four_clients_meet_the_same_model",
            messages=[{"role": "user", "content": f"{QUESTION} (gemini)"}],
            tools=[{"type": "function", "function": {"name": "list_files", "parameters": {}}}])
    assert reply.choices[0].message.tool_calls[0].function.name == "list_files"


def test_none_mode_without_a_cassette_fails_at_set_up_saying_how_to_record(pytester: pytest.Pytester):
    _suite(pytester)
    done = _run(pytester)
    assert done.ret != 0
    assert "no cassette at" in done.stdout.str() and "--llm-record-mode=once" in done.stdout.str()


def test_a_recording_mode_without_an_upstream_fails_naming_where_to_give_one(pytester: pytest.Pytester,
                                                                           monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MOCK_LLM_UPSTREAM", raising=False)
    _suite(pytester)
    done = _run(pytester, "--llm-record-mode=all")
    assert done.ret != 0 and "MOCK_LLM_UPSTREAM" in done.stdout.str()


def test_an_unknown_record_mode_is_a_usage_error(pytester: pytest.Pytester):
    _suite(pytester)
    done = _run(pytester, "--llm-record-mode=sometimes")
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "none, once, new_episodes, all" in done.stderr.str()


def test_each_test_has_its_own_cassette_path_beside_its_file(tmp_path):
    module = tmp_path / "tests" / "test_agent.py"
    beside = tmp_path / "tests" / "cassettes" / "test_agent"
    assert cassette_path(module, "test_one") == beside / "test_one.json"
    assert cassette_path(module, "TestA.test_one").name == "TestA.test_one.json"
    assert cassette_path(module, "test_p[a/b c]").name == "test_p_a_b_c_.json"
