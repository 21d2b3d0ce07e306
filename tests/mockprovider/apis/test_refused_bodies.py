"""Bodies the real OpenAI and Anthropic APIs refuse get that API's own 400, naming the parameter
(the spec subset in tests/mockprovider/spec and the official SDKs' types say what is valid)."""

from __future__ import annotations

import json

import pytest
from formats_support import FUZZ
from hypothesis import given
from hypothesis import strategies as st

from mockprovider.reading.validation import MAX_INT, lone_surrogate

USER = {"role": "user", "content": "hi"}
JSON = {"content-type": "application/json"}


def chat(**fields) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": "plan", "messages": [USER], **fields}


def responses(**fields) -> tuple[str, dict]:
    return "/v1/responses", {"model": "plan", "input": "hi", **fields}


def messages(**fields) -> tuple[str, dict]:
    return "/v1/messages", {"model": "plan", "max_tokens": 50, "messages": [USER], **fields}


REFUSED = {
    "chat lone surrogate": (chat(messages=[{"role": "user", "content": "h\ud800"}]), "messages[0].content"),
    "chat lone low surrogate in a tool": (chat(tools=[{"type": "function", "function": {"name": "f\udc00"}}]),
                                          "tools[0].function.name"),
    "responses lone surrogate": (responses(input=[{"role": "user", "content": "a\udbff"}]),
                                 "input[0].content"),
    "messages lone surrogate": (messages(system="s\ud800"), "system"),
    "chat max_tokens": (chat(max_tokens=10**30), "max_tokens"),
    "chat max_completion_tokens": (chat(max_completion_tokens=MAX_INT + 1), "max_completion_tokens"),
    "responses max_output_tokens": (responses(max_output_tokens=10**30), "max_output_tokens"),
    "messages max_tokens": (messages(max_tokens=10**30), "max_tokens"),
    "chat temperature": (chat(temperature="hot"), "temperature"),
    "chat temperature above 2": (chat(temperature=2.5), "temperature"),
    "chat temperature NaN": (chat(temperature=float("nan")), "temperature"),
    "responses temperature": (responses(temperature="hot"), "temperature"),
    "messages temperature": (messages(temperature="hot"), "temperature"),
    "messages temperature above 1": (messages(temperature=1.5), "temperature"),
    "chat tool without a function": (chat(tools=[{"type": "function"}]), "tools[0].function"),
    "chat parameters a string": (
        chat(tools=[{"type": "function", "function": {"name": "f", "parameters": "x"}}]),
        "tools[0].function.parameters"),
    "responses parameters a string": (responses(tools=[{"type": "function", "name": "f", "parameters": "x"}]),
                                      "tools[0].parameters"),
    "responses reasoning effort": (responses(reasoning={"effort": "maximum"}), "reasoning.effort"),
    "responses json_schema without a schema": (
        responses(text={"format": {"type": "json_schema", "name": "x"}}), "text.format.schema"),
    "messages budget_tokens": (messages(thinking={"type": "enabled", "budget_tokens": "x"}),
                               "thinking.budget_tokens"),
}


def _post(client, path: str, body: dict):
    return client.post(path, content=json.dumps(body).encode(), headers=JSON)


@pytest.mark.parametrize("case", REFUSED)
def test_a_body_the_real_api_refuses_is_its_own_400_naming_the_parameter(in_process, case):
    (path, body), param = REFUSED[case]
    response = _post(in_process, path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    if path == "/v1/messages":  # Anthropic's shape has no param: the message names it
        assert response.json()["type"] == "error" and error["type"] == "invalid_request_error"
        assert param.split(".")[0] in error["message"]
    else:
        assert error["param"] == param and error["type"] == "invalid_request_error"


ACCEPTED = {
    "an escaped pair (an emoji, as Python clients send it)": chat(
        messages=[{"role": "user", "content": "\U0001f600"}]),
    "an escaped backslash before u": chat(messages=[{"role": "user", "content": "\\ud800"}]),
    "the largest integer": chat(max_tokens=MAX_INT),
    "a null temperature": chat(temperature=None),
    "temperature 2": responses(temperature=2),
    "effort max, in the spec's ReasoningEffort": responses(reasoning={"effort": "max"}),
    "json_schema with a schema": responses(
        text={"format": {"type": "json_schema", "name": "x", "schema": {}}}),
    "Gemini keeps a lone surrogate": ("/v1beta/models/plan:generateContent",
                                      {"contents": [{"role": "user", "parts": [{"text": "h\ud800"}]}]}),
    "Ollama keeps a lone surrogate": ("/api/chat", {"model": "plan", "stream": False,
                                                    "messages": [{"role": "user", "content": "h\ud800"}]}),
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_the_real_apis_take_is_still_answered(in_process, case):
    path, body = ACCEPTED[case]
    assert _post(in_process, path, body).status_code == 200


def test_only_a_lone_surrogate_is_found_and_its_path_named():
    def found(value):
        raw = json.dumps(value).encode()  # a pair is written as two escapes, parsed as one character
        return lone_surrogate(raw, json.loads(raw))

    assert found({"a": ["ok", {"b": "x\udc00"}]}) == "a[1].b"
    assert found({"a": "\ud83d\ude00\udc00"}) == "a"  # a lone low one right after a pair
    assert found({"a": "\ud83d\ude00", "b": "\\ud800 is how JSON writes it"}) is None


SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
FORMATS = {
    "chat": lambda text, **f: chat(messages=[{"role": "user", "content": text}], **f),
    "responses": lambda text, **f: responses(input=[{"role": "user", "content": text}], **f),
    "messages": lambda text, **f: messages(messages=[{"role": "user", "content": text}], **f),
}
TOKENS_FIELD = {"chat": "max_completion_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}


@FUZZ
@given(fmt=st.sampled_from(list(FORMATS)), text=st.text(max_size=8), at=st.integers(0, 8), lone=SURROGATE)
def test_a_lone_surrogate_anywhere_in_a_text_is_refused(in_process, fmt, text, at, lone):
    path, body = FORMATS[fmt](text[:at] + lone + text[at:])
    response = _post(in_process, path, body)
    named = "input[0].content" if fmt == "responses" else "messages[0].content"
    assert response.status_code == 400 and named in response.text


@FUZZ
@given(fmt=st.sampled_from(list(FORMATS)), tokens=st.integers(MAX_INT + 1, 10**40),
       temperature=st.text(max_size=5) | st.lists(st.integers(), max_size=2) | st.floats(2.01, 1e9))
def test_out_of_range_tokens_and_a_temperature_not_a_number_are_refused(in_process, fmt, tokens, temperature):
    for field, value in ((TOKENS_FIELD[fmt], tokens), ("temperature", temperature)):
        path, body = FORMATS[fmt]("hi", **{field: value})
        response = _post(in_process, path, body)
        assert response.status_code == 400 and field in response.text, (field, value, response.text)
