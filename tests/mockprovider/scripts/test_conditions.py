"""The conditions of scenario files: what each tests, `not`, and regexes on a linear-time engine."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mockprovider.app import create_app
from mockprovider.scripts.conditions import MAX_MATCH_CHARS, compile_pattern
from mockprovider.scripts.files import ScenarioFileError, compile_scenario
from mockprovider.scripts.scenarios import Conversation
from mockprovider.server import serve_in_thread

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
CHAT = (
    {"role": "system", "content": "You are a terse weather bot."},
    {"role": "user", "content": "Weather in Paris, please"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "a", "content": "rain"},
    {"role": "assistant", "content": "Take an umbrella."},
    {"role": "user", "content": "And in Rome tomorrow?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "b", "type": "function", "function": {"name": "get_forecast", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "b", "content": "Sunny, 24 C"},
)


def _holds(condition: dict[str, Any], messages: tuple[dict[str, Any], ...] = CHAT,
           tools: tuple[dict[str, Any], ...] = (WEATHER_TOOL,)) -> bool:
    script = compile_scenario({"name": "c", "after_last": "repeat", "turns": [[
        {"if": condition, "content": "yes"}, {"content": "no"}]]}, source="test")
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return script(Conversation(turn=turn, tool_text="", messages=messages, tools=tools)).content == "yes"


@pytest.mark.parametrize(("condition", "expected"), [
    ({"last_user_contains": "Rome"}, True),
    ({"last_user_contains": "Paris"}, False),  # the newest user message only
    ({"user_contains": "Paris"}, True),  # the first one, as before
    ({"last_user_matches": r"(?i)^and in \w+ tomorrow\?$"}, True),
    ({"last_user_matches": "Paris"}, False),
    ({"system_contains": "weather bot"}, True),
    ({"system_contains": "Paris"}, False),
    ({"has_tool": "get_weather"}, True),
    ({"has_tool": "get_forecast"}, False),  # called earlier, but not offered in this request
    ({"tool_result_of": "get_forecast"}, True),  # the last tool result answers get_forecast's call
    ({"tool_result_of": "get_weather"}, False),
    ({"answers_call": "b"}, True),
    ({"answers_call": "a"}, False),
    ({"after_tool_result": True}, True),
    ({"turn_at_least": 3}, True),
    ({"turn_at_least": 4}, False),
    ({"not": {"has_tool": "get_forecast"}}, True),
    ({"not": {"last_user_contains": "Rome"}}, False),
    ({"not": {"not": {"turn_at_least": 0}}}, True),
    ({"all": [{"turn_at_least": 3}, {"not": {"turn_at_least": 4}}]}, True),  # exactly turn 3
    ({"any": [{"has_tool": "nope"}, {"not": {"system_contains": "nope"}}]}, True),
])
def test_each_condition_tests_what_its_name_says(condition: dict[str, Any], expected: bool):
    assert _holds(condition) is expected


def test_after_tool_result_is_false_once_the_user_speaks_again():
    asked_again = (*CHAT, {"role": "user", "content": "Thanks. And Oslo?"})
    assert not _holds({"after_tool_result": True}, asked_again)
    assert _holds({"after_tool_result": False}, asked_again)
    assert not _holds({"answers_call": "b"}, asked_again)


def test_has_tool_sees_the_tools_of_every_wire_format():
    script = {"name": "offered", "turns": [[{"if": {"has_tool": "get_weather"}, "content": "offered"},
                                            {"content": "not offered"}]]}
    with serve_in_thread(create_app(scenario_files=[script])) as base, httpx.Client() as http:
        root = base.removesuffix("/v1")
        hi = [{"role": "user", "content": "hi"}]
        chat = http.post(f"{root}/v1/chat/completions", json={
            "model": "offered", "messages": hi, "tools": [WEATHER_TOOL]}).json()
        responses = http.post(f"{root}/v1/responses", json={
            "model": "offered", "input": "hi", "tools": [{"type": "function", "name": "get_weather"}]}).json()
        messages = http.post(f"{root}/v1/messages", json={
            "model": "offered", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}).json()
        bare = http.post(f"{root}/v1/chat/completions", json={
            "model": "offered", "messages": [{"role": "user", "content": "hi"}]}).json()
    assert chat["choices"][0]["message"]["content"] == "offered"
    assert responses["output"][0]["content"][0]["text"] == "offered"
    assert messages["content"][0]["text"] == "offered"
    assert bare["choices"][0]["message"]["content"] == "not offered"


# --- regexes on RE2 -----------------------------------------------------------------------------

# Patterns a backtracking engine takes exponential (or worse than quadratic) time on, each with
# a text crafted against it: with RE2 they are accepted and answer at once.
CRAFTED = [
    (r"^(?:\w+\s?){1,8}$", "a" * 42 + "!"),
    (r"(?:a*){16}x", "a" * 61),
    (r"(a+)+$", "a" * 61 + "!"),
    (r"(a|aa)*b", "a" * 61),
]


@pytest.mark.parametrize(("pattern", "text"), CRAFTED)
def test_patterns_that_backtrack_exponentially_in_re_are_matched_by_re2(pattern: str, text: str):
    messages = ({"role": "user", "content": text}, {"role": "assistant", "content": "ok"},
                {"role": "tool", "tool_call_id": "x", "content": text})
    assert _holds({"tool_result_matches": pattern}, messages) is False
    assert _holds({"last_user_matches": pattern}, messages) is False
    assert _holds({"last_user_matches": pattern}, ({"role": "user", "content": "aaax"},)) is bool(
        re.search(pattern, "aaax"))


@pytest.mark.parametrize("pattern", [r"(.*)\1x", r"(?=a)b", r"(?<=a)b", r"(?!a)b", r"(?>a+)b", r"a++b"])
def test_what_only_a_backtracking_engine_can_match_is_refused_with_the_json_path(pattern: str):
    with pytest.raises(ScenarioFileError) as caught:
        compile_scenario({"name": "r", "turns": [[{"if": {"any": [{"last_user_matches": pattern}]},
                                                   "content": "x"}]]}, source="re.json")
    where = "re.json: $.turns[0][0].if.any[0].last_user_matches: "
    assert str(caught.value).startswith(where + "not a pattern RE2")


def test_a_match_reads_at_most_max_match_chars_of_the_text():
    last = ({"role": "user", "content": " " * (MAX_MATCH_CHARS - 5) + "found"},)
    assert _holds({"last_user_matches": "found"}, last)
    longer = ({"role": "user", "content": " " + last[0]["content"]},)
    assert not _holds({"last_user_matches": "found"}, longer)


def test_a_lone_surrogate_in_the_clients_text_is_matched_not_a_500():
    odd = ({"role": "user", "content": "caf\ud800 au lait"},)
    assert _holds({"last_user_matches": "au lait$"}, odd)
    assert not _holds({"last_user_matches": "^café"}, odd)


# A small regex grammar over a few letters: every generated pattern is valid for both engines.
_ATOMS = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", r"\d", "(?:a|b)", "(a)"])
_REPEATS = st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "*?"])
_PATTERNS = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.tuples(inner, _REPEATS).map(lambda p: f"(?:{p[0]}){p[1]}"),
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda p: f"(?:{p[0]}|{p[1]})"),
        inner.map(lambda p: f"({p})"),
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(pattern=st.tuples(st.sampled_from(["", "^"]), _PATTERNS, st.sampled_from(["", "$"])).map("".join),
       text=st.text(alphabet="ab1", max_size=12))
def test_re2_conditions_agree_with_python_re_on_the_patterns_both_accept(pattern: str, text: str):
    assert _holds({"last_user_matches": pattern}, ({"role": "user", "content": text},)) is bool(
        re.search(pattern, text))


@settings(max_examples=200, deadline=None)
@given(pattern=st.text(alphabet="ab()[]*+?{}|\\^$.1?<=!:>", max_size=16))
def test_any_pattern_either_loads_or_is_refused_in_one_line(pattern: str):
    try:
        script = compile_scenario({"name": "r", "after_last": "repeat", "turns": [[
            {"if": {"tool_result_matches": pattern}, "content": "yes"}, {"content": "no"}]]}, source="p.json")
    except ScenarioFileError as e:
        assert str(e).startswith("p.json: $.turns[0][0].if.tool_result_matches: ") and "\n" not in str(e)
        return
    messages = ({"role": "user", "content": "go"}, {"role": "assistant", "content": "x"},
                {"role": "tool", "tool_call_id": "t", "content": "ab" * 40})
    assert script(Conversation(turn=1, tool_text="", messages=messages)).content in ("yes", "no")


# --- the server stays responsive ------------------------------------------------------------------


@pytest.fixture
def crafted_server() -> Iterator[str]:
    scripts = [{"name": f"crafted{i}", "after_last": "repeat", "turns": [[
        {"if": {"tool_result_matches": pattern}, "content": "matched"}, {"content": "no match"}]]}
        for i, (pattern, _) in enumerate(CRAFTED)]
    with serve_in_thread(create_app(scenario_files=scripts)) as base:
        yield base.removesuffix("/v1")


def test_healthz_answers_while_crafted_tool_results_arrive(crafted_server: str):
    # Before RE2, the first pattern's search held the event loop for seconds per request. Each
    # request here must be answered within the client's timeout, healthz included.
    answers: list[str] = []

    def attack() -> None:
        with httpx.Client(timeout=30) as http:
            for _ in range(5):
                for i, (_, text) in enumerate(CRAFTED):
                    body = {"model": f"crafted{i}", "messages": [
                        {"role": "user", "content": "go"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "t", "content": text}]}
                    reply = http.post(f"{crafted_server}/v1/chat/completions", json=body)
                    answers.append(reply.json()["choices"][0]["message"]["content"])

    attackers = [threading.Thread(target=attack) for _ in range(2)]
    for thread in attackers:
        thread.start()
    with httpx.Client(timeout=5) as http:
        health = [http.get(f"{crafted_server}/healthz").status_code for _ in range(20)]
    for thread in attackers:
        thread.join()
    assert health == [200] * 20
    assert answers == ["no match"] * (2 * 5 * len(CRAFTED))


def test_a_pattern_with_groups_compiles_without_captures():
    # Captures make RE2 find submatches with its NFA, time × pattern size on every search, on
    # the event loop; a condition needs only "does it match", which RE2's DFA answers.
    assert compile_pattern(r"(?s)(.*a.*b.*c.*){20}").groups == 0
    assert _holds({"last_user_matches": r"(a)(b)\z"}, ({"role": "user", "content": "xab"},))


@pytest.mark.parametrize(("pattern", "text", "expected"), [
    # As docs/scenarios.md warns: where RE2 and Python's re differ on the same pattern.
    (r"passed$", "3 passed\n", False),  # re: True; `$` is the very end of the text
    (r"passed\n?$", "3 passed\n", True),
    (r"(?m)passed$", "3 passed\n", True),
    (r"^\d+$", "١٢٣", False),  # re: True; \d, \w, \s and \b are ASCII
    (r"^\p{Nd}+$", "١٢٣", True),
    (r"^\w+$", "café", False),
    (r"^[\p{Latin}\d_]+$", "café", True),
    (r"(?i)CAFÉ", "café", True),  # case folding is Unicode, as in re
])
def test_re2_semantics_the_docs_warn_about(pattern: str, text: str, expected: bool):
    assert _holds({"last_user_matches": pattern}, ({"role": "user", "content": text},)) is expected


def test_a_pattern_over_the_size_limit_is_told_why_even_without_a_repeat_count():
    # \pL, every Unicode letter, is a large automaton by itself; "use smaller repeat counts"
    # sent its author looking for a repeat the pattern does not have.
    with pytest.raises(ScenarioFileError) as caught:
        compile_scenario({"name": "u", "turns": [[{"if": {"last_user_matches": r"^\pL+$"}, "content": "x"}]]},
                         source="u.json")
    assert "a whole Unicode category such as \\pL" in str(caught.value)


@pytest.mark.parametrize("pattern", [r"done$", r"done\b", r"done\z"])
def test_the_cut_at_max_match_chars_is_not_the_end_of_the_text(pattern: str):
    # Searching only a prefix must not make its cut look like the end of the text (or a word's).
    cut = " " * (MAX_MATCH_CHARS - 4) + "done"
    assert _holds({"last_user_matches": pattern}, ({"role": "user", "content": cut},))
    assert not _holds({"last_user_matches": pattern}, ({"role": "user", "content": cut + "x more"},))
