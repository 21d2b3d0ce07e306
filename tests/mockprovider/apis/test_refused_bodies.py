"""Bodies the real OpenAI and Anthropic APIs refuse get that API's own 400, naming the parameter
(the spec subset in tests/mockprovider/spec and the official SDKs' types say what is valid)."""

from __future__ import annotations

import json

import pytest
from formats_support import FUZZ
from hypothesis import given
from hypothesis import strategies as st

from mockprovider.reading import settings
from mockprovider.reading.validation import MAX_INT, lone_surrogate

USER = {"role": "user", "content": "hi"}
JSON = {"content-type": "application/json"}


def chat(**fields) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": "plan", "messages": [USER], **fields}


def responses(**fields) -> tuple[str, dict]:
    return "/v1/responses", {"model": "plan", "input": "hi", **fields}


def messages(**fields) -> tuple[str, dict]:
    return "/v1/messages", {"model": "plan", "max_tokens": 50, "messages": [USER], **fields}


def gemini(**config) -> tuple[str, dict]:
    return "/v1beta/models/plan:generateContent", {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": config}


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
    "chat top_p above 1": (chat(top_p=2), "top_p"),
    "chat top_p a string": (chat(top_p="x"), "top_p"),
    "chat presence_penalty above 2": (chat(presence_penalty=5), "presence_penalty"),
    "chat frequency_penalty a string": (chat(frequency_penalty="x"), "frequency_penalty"),
    "chat seed a string": (chat(seed="x"), "seed"),
    "chat seed past 64 bits": (chat(seed=10**30), "seed"),
    "chat seed past any float": (chat(seed=10**400), "seed"),
    "chat top_logprobs past any float": (chat(logprobs=True, top_logprobs=10**400), "top_logprobs"),
    "responses max_tool_calls past any float": (responses(max_tool_calls=10**400), "max_tool_calls"),
    "messages top_k past any float": (messages(top_k=10**400), "top_k"),
    "gemini topK past any float": (gemini(topK=10**400), "generationConfig.topK"),
    "gemini seed a string of 5,000 digits": (gemini(seed="9" * 5000), "generationConfig.seed"),
    "gemini seed a string of two minus signs": (gemini(seed="--5"), "generationConfig.seed"),
    "gemini topK an integral decimal past 32 bits": (gemini(topK=1e300), "generationConfig.topK"),
    "chat logprobs a string": (chat(logprobs="x"), "logprobs"),
    "chat top_logprobs above 20": (chat(logprobs=True, top_logprobs=21), "top_logprobs"),
    "chat five stop sequences": (chat(stop=["a"] * 5), "stop"),
    "chat stop a number": (chat(stop=5), "stop"),
    "chat service_tier unknown": (chat(service_tier="bogus"), "service_tier"),
    "chat reasoning_effort unknown": (chat(reasoning_effort="maximum"), "reasoning_effort"),
    "chat modalities unknown": (chat(modalities=["smell"]), "modalities[0]"),
    "chat user a number": (chat(user=5), "user"),
    "chat metadata a number": (chat(metadata=5), "metadata"),
    "chat response_format type unknown": (chat(response_format={"type": "bogus"}), "response_format.type"),
    "chat response_format a string": (chat(response_format="json"), "response_format"),
    "chat json_schema format without json_schema": (chat(response_format={"type": "json_schema"}),
                                                    "response_format.json_schema"),
    "chat stream_options without stream": (chat(stream_options={"include_usage": True}), "stream_options"),
    "responses top_p above 1": (responses(top_p=2), "top_p"),
    "responses truncation unknown": (responses(truncation="bogus"), "truncation"),
    "responses text.format type unknown": (responses(text={"format": {"type": "bogus"}}), "text.format.type"),
    "responses parallel_tool_calls a string": (responses(parallel_tool_calls="x"), "parallel_tool_calls"),
    "messages top_p above 1": (messages(top_p=2), "top_p"),
    "messages top_k negative": (messages(top_k=-1), "top_k"),
    "messages top_k a string": (messages(top_k="x"), "top_k"),
    "messages stop_sequences a string": (messages(stop_sequences="x"), "stop_sequences"),
    "messages metadata.user_id a number": (messages(metadata={"user_id": 5}), "metadata.user_id"),
    "messages service_tier unknown": (messages(service_tier="bogus"), "service_tier"),
    "messages thinking type unknown": (messages(thinking={"type": "bogus"}), "thinking.type"),
    "messages budget_tokens below 1024": (
        messages(max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 100}),
        "thinking.budget_tokens"),
    "messages budget_tokens not below max_tokens": (
        messages(max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 5000}), "max_tokens"),
    "gemini temperature above 2": (gemini(temperature=3), "generationConfig.temperature"),
    "gemini topK a string": (gemini(topK="x"), "generationConfig.topK"),
    "gemini top_p above 1": (gemini(top_p=2), "generationConfig.top_p"),
    "gemini six stopSequences": (gemini(stopSequences=["a"] * 6), "generationConfig.stopSequences"),
    "count_tokens with max_tokens": (("/v1/messages/count_tokens", {"model": "plan", "messages": [USER],
                                                                    "max_tokens": 10}), "max_tokens"),
}


def _post(client, path: str, body: dict):
    return client.post(path, content=json.dumps(body).encode(), headers=JSON)


@pytest.mark.parametrize("case", REFUSED)
def test_a_body_the_real_api_refuses_is_its_own_400_naming_the_parameter(in_process, case):
    (path, body), param = REFUSED[case]
    response = _post(in_process, path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    if path.startswith("/v1beta/"):  # Google's shape: the message names the field
        assert error["status"] == "INVALID_ARGUMENT" and param in error["message"]
    elif path.startswith("/v1/messages"):  # Anthropic's shape has no param: the message names it
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
    "every setting at its bound": chat(top_p=1, presence_penalty=-2, frequency_penalty=2, seed=-(2**63),
                                       logprobs=True, top_logprobs=20, stop=["a", "b", "c", "d"],
                                       service_tier="flex", reasoning_effort="max", modalities=["text"],
                                       user="u", metadata={"k": "v"}, verbosity="low",
                                       parallel_tool_calls=False,
                                       response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
    "null settings, as SDKs send them": chat(top_p=None, stop=None, seed=None, stream_options=None,
                                             service_tier=None, response_format=None),
    "stop one string": chat(stop="\n"),
    "stream_options with stream": chat(stream=True, stream_options={"include_usage": True}),
    "responses settings at their bounds": responses(top_p=0, truncation="disabled", service_tier="ultrafast",
                                                    include=["reasoning.encrypted_content"], max_tool_calls=1,
                                                    text={"format": {"type": "text"}, "verbosity": "high"}),
    "messages settings at their bounds": messages(max_tokens=2048, top_p=1, top_k=0, stop_sequences=["x"],
                                                  service_tier="standard_only", metadata={"user_id": None},
                                                  thinking={"type": "enabled", "budget_tokens": 1024}),
    "messages thinking adaptive": messages(thinking={"type": "adaptive"}),
    "Gemini integers as google-genai and protobuf's JSON write them": gemini(topK=40.0, seed="-7"),
    "Gemini settings at their bounds": gemini(temperature=2, top_p=1, topK=1, seed=-(2**31),
                                              stopSequences=["a"] * 5, responseMimeType="application/json"),
    "Gemini keeps a lone surrogate": ("/v1beta/models/plan:generateContent",
                                      {"contents": [{"role": "user", "parts": [{"text": "h\ud800"}]}]}),
    "Ollama keeps a lone surrogate": ("/api/chat", {"model": "plan", "stream": False,
                                                    "messages": [{"role": "user", "content": "h\ud800"}]}),
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_the_real_apis_take_is_still_answered(in_process, case):
    path, body = ACCEPTED[case]
    assert _post(in_process, path, body).status_code == 200


def test_interleaved_thinkings_budget_may_exceed_max_tokens(in_process):
    # Anthropic: with interleaved thinking the budget is the whole turn's, across its thinking
    # blocks, and may exceed max_tokens; without the beta it must stay below it.
    path, body = messages(max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 5000})
    beta = {**JSON, "anthropic-beta": "files-api-2025-04-14,interleaved-thinking-2025-05-14"}
    assert in_process.post(path, content=json.dumps(body).encode(), headers=beta).status_code == 200
    assert _post(in_process, path, body).status_code == 400


def test_only_a_lone_surrogate_is_found_and_its_path_named():
    def found(value):
        raw = json.dumps(value).encode()  # a pair is written as two escapes, parsed as one character
        return lone_surrogate(raw, json.loads(raw))

    assert found({"a": ["ok", {"b": "x\udc00"}]}) == "a[1].b"
    assert found({"a": "\ud83d\ude00\udc00"}) == "a"  # a lone low one right after a pair
    assert found({"a": "\ud83d\ude00", "b": "\\ud800 is how JSON writes it"}) is None


SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
FORMATS = {
    "chat": lambda said, **f: chat(messages=[{"role": "user", "content": said}], **f),
    "responses": lambda said, **f: responses(input=[{"role": "user", "content": said}], **f),
    "messages": lambda said, **f: messages(messages=[{"role": "user", "content": said}], **f),
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


SETTINGS = {"chat": settings.CHAT, "responses": settings.RESPONSES, "messages": settings.MESSAGES}


@pytest.mark.parametrize(("fmt", "key"), [(fmt, key) for fmt, table in SETTINGS.items() for key in table])
def test_every_checked_setting_of_another_json_type_is_refused_naming_it(in_process, fmt, key):
    # An array of objects is no setting's type (an array of strings, a number or an object at most).
    path, body = FORMATS[fmt]("hi", **{key: [{"a": 1}]})
    response = _post(in_process, path, body)
    assert response.status_code == 400 and key in response.json()["error"]["message"], response.text


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("surrogate", [b"\xed\xa0\x80", b"\xed\xb0\x80", b"\xed\xa0\xbd\xed\xb8\x80"],
                         ids=["high", "low", "a pair, CESU-8"])
def test_a_surrogate_written_as_raw_utf8_bytes_is_refused_as_invalid_utf8(in_process, fmt, surrogate):
    # No UTF-8 encodes a surrogate, not even as a pair (that is CESU-8); Python's JSON parser takes
    # one from bytes all the same. The real APIs refuse the body as they refuse any invalid UTF-8.
    path, body = FORMATS[fmt]("a\u0001b")
    raw = json.dumps(body).encode().replace(b"\\u0001", surrogate)
    response = in_process.post(path, content=raw, headers=JSON)
    assert response.status_code == 400, response.text
    assert "UnicodeDecodeError" in response.text


def test_text_whose_utf8_has_the_surrogates_lead_byte_is_still_answered(in_process):
    # U+D55C (Hangul) is ED 95 9C in UTF-8: the lead byte of a surrogate, and valid.
    for fmt in FORMATS:
        path, body = FORMATS[fmt]("\ud55c\uae00")
        response = in_process.post(path, content=json.dumps(body, ensure_ascii=False).encode(), headers=JSON)
        assert response.status_code == 200, (fmt, response.text)
