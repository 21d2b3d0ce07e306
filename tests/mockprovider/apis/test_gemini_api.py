"""Gemini's generateContent: the official `google-genai` client drives the scripts unchanged."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import ssl

import httpx
import openai
import pytest
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated
from google import genai
from google.genai import errors, types
from hypothesis import given
from hypothesis import strategies as st

import o200k
from mockprovider.apis.anthropic import messages_request
from mockprovider.apis.gemini_request import generate_request
from mockprovider.app import create_app
from mockprovider.scripts.scenarios import ANSWER_PLAN
from mockprovider.server import serve_in_thread

QUESTION = "Which file mentions a timeout?"
SYSTEM = "You answer questions about log files."
SCHEMAS = {
    "list_files": {"type": "object", "properties": {}},
    "read_file": {"type": "object", "properties": {"path": {"type": "string"}}},
}
DESCRIPTIONS = {"list_files": "List the files.", "read_file": "Read one file."}
RESULTS = {"list_files": "errors.log\naccess.log\nnotes.txt", "read_file": "worker 7 timed out"}
TOOLS = [types.Tool(function_declarations=[
    types.FunctionDeclaration(name=name, description=DESCRIPTIONS[name], parameters_json_schema=SCHEMAS[name])
    for name in SCHEMAS
])]
MANUAL = types.AutomaticFunctionCallingConfig(disable=True)
OFFER = types.GenerateContentConfig(tools=TOOLS, automatic_function_calling=MANUAL)
"""The tools offered: without any, a real model (and the mock) answers in text."""


def _root(mock_url: str) -> str:
    """google-genai's base URL: it appends `/{version}/models/...` itself."""
    return mock_url.removesuffix("/v1")


@functools.cache
def _trust_store() -> ssl.SSLContext:
    """One SSL context for every client here: google-genai loads the CA bundle twice per client
    unless it is given one."""
    return httpx.create_ssl_context()


def _client(mock_url: str, *, api_key: str = "unused", **options) -> genai.Client:
    tls = _trust_store()
    return genai.Client(api_key=api_key, http_options=types.HttpOptions(
        base_url=_root(mock_url), client_args={"verify": tls}, async_client_args={"verify": tls, "ssl": tls},
        **options))


def _chat_tools() -> list[dict]:
    """The same tools as a chat client sends them, written out independently of the mock."""
    return [{"type": "function", "function": {"name": name, "description": DESCRIPTIONS[name],
                                              "parameters": SCHEMAS[name]}} for name in SCHEMAS]


def _generate(client: genai.Client, contents: list, *, stream: bool, model: str = "plan",
              **config) -> types.GenerateContentResponse:
    """One reply; a stream's chunks joined into the reply they make up."""
    config = types.GenerateContentConfig(**{"system_instruction": SYSTEM, "tools": TOOLS,
                                            "automatic_function_calling": MANUAL, **config})
    if not stream:
        return client.models.generate_content(model=model, contents=contents, config=config)
    chunks = list(client.models.generate_content_stream(model=model, contents=contents, config=config))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    if parts and parts[0].text is not None:
        parts = [types.Part(text="".join(p.text for p in parts))]
    last = chunks[-1]
    assert all(c.usage_metadata is None for c in chunks[:-1]), "only the last chunk carries usage"
    candidate = last.candidates[0].model_copy(update={"content": types.Content(role="model", parts=parts)})
    return last.model_copy(update={"candidates": [candidate]})


def _drive_plan(client: genai.Client, *, stream: bool) -> tuple[list, list[list[dict]]]:
    """Three turns of `plan`, each reply and its function responses fed back (automatic function
    calling off). Returns the replies and, beside them, the chat-shaped conversation each
    request stood for (built here, not by the mock), for counting tokens independently."""
    contents: list = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]
    chat: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    replies, conversations = [], []
    for _ in range(3):
        reply = _generate(client, contents, stream=stream)
        replies.append(reply)
        conversations.append(list(chat))
        calls = reply.function_calls or []
        contents.append(reply.candidates[0].content)
        contents.append(types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(id=c.id, name=c.name,
                                                                response={"result": RESULTS[c.name]}))
            for c in calls
        ]))
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.args, separators=(",", ":"))}}
            for c in calls
        ]})
        chat += [{"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.name]} for c in calls]
    return replies, conversations


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
def test_official_client_drives_plan_to_the_scripted_answer(mock_url, stream):
    with _client(mock_url) as client:
        replies, _ = _drive_plan(client, stream=stream)
    calls = [(c.id, c.name, c.args) for r in replies[:2] for c in r.function_calls]
    assert calls == [("c1", "list_files", {}), ("c2", "read_file", {"path": "errors.log"})]
    assert [r.candidates[0].finish_reason for r in replies] == [types.FinishReason.STOP] * 3
    assert replies[-1].text == ANSWER_PLAN
    assert all(r.model_version == "plan" for r in replies)


def test_usage_is_the_chat_formula_and_prompt_tokens_grow_by_exactly_what_was_appended(mock_url):
    with _client(mock_url) as client:
        replies, conversations = _drive_plan(client, stream=False)
    prompts = [r.usage_metadata.prompt_token_count for r in replies]
    assert prompts == [o200k.prompt_tokens(c, _chat_tools()) for c in conversations]
    for t in (1, 2):
        appended = conversations[t][len(conversations[t - 1]):]
        assert prompts[t] - prompts[t - 1] == sum(o200k.message_tokens(m) for m in appended)
    outputs = [r.usage_metadata.candidates_token_count for r in replies]
    assert outputs[2] == o200k.count(ANSWER_PLAN)
    totals = [r.usage_metadata.total_token_count for r in replies]
    assert totals == [p + o for p, o in zip(prompts, outputs, strict=True)]


def test_streamed_and_plain_replies_are_the_same(mock_url):
    with _client(mock_url) as client:
        streamed, _ = _drive_plan(client, stream=True)
        plain, _ = _drive_plan(client, stream=False)

    def essence(r: types.GenerateContentResponse) -> tuple:
        candidate = r.candidates[0]
        return candidate.content.model_dump(), candidate.finish_reason, r.usage_metadata.model_dump()

    assert [essence(r) for r in streamed] == [essence(r) for r in plain]


def _list_files() -> str:
    """List the files in the folder."""
    return RESULTS["list_files"]


def _read_file(path: str) -> str:
    """Read one file.

    Args:
      path: the file's name.
    """
    return RESULTS["read_file"] if path == "errors.log" else f"no such file: {path}"


@pytest.mark.parametrize("stream", [False, True], ids=["send_message", "send_message_stream"])
def test_automatic_function_calling_runs_the_tools_and_reaches_the_answer(mock_url, stream):
    ran = []

    def list_files() -> str:
        """List the files in the folder."""
        ran.append(("list_files", {}))
        return _list_files()

    def read_file(path: str) -> str:
        """Read one file.

        Args:
          path: the file's name.
        """
        ran.append(("read_file", {"path": path}))
        return _read_file(path)

    config = types.GenerateContentConfig(system_instruction=SYSTEM, tools=[list_files, read_file])
    with _client(mock_url) as client:
        chat = client.chats.create(model="plan", config=config)
        if stream:
            text = "".join(chunk.text or "" for chunk in chat.send_message_stream(QUESTION))
        else:
            text = chat.send_message(QUESTION).text
    assert text == ANSWER_PLAN
    assert ran == [("list_files", {}), ("read_file", {"path": "errors.log"})]


def test_the_async_client_drives_plan_as_the_sync_one_does(mock_url):
    # Agent frameworks (Google's ADK among them) call the async client.
    async def drive() -> list[types.GenerateContentResponse]:
        async with _client(mock_url).aio as client:
            return [await client.models.generate_content(model="plan", contents=QUESTION, config=OFFER),
                    *[chunk async for chunk in await client.models.generate_content_stream(
                        model="plan", contents=[c.model_dump(exclude_none=True) for c in ANSWER_TURN])]]

    first, *chunks = asyncio.run(drive())
    assert [(c.id, c.name) for c in first.function_calls] == [("c1", "list_files")]
    assert "".join(c.text for c in chunks) == ANSWER_PLAN


@pytest.mark.parametrize("version", ["v1", "v1beta"])
def test_both_api_versions_serve_generate_content(mock_url, version):
    with _client(mock_url, api_version=version) as client:
        reply = client.models.generate_content(model="plan", contents=QUESTION, config=OFFER)
    assert [(c.id, c.name) for c in reply.function_calls] == [("c1", "list_files")]


def test_sampling_settings_the_client_sends_as_decimals_are_answered(mock_url):
    # google-genai types top_k as a float: top_k=40 goes out as "topK": 40.0, which Google's
    # API reads as the integer it is (protobuf's JSON takes an integral number, or its digits
    # as a string, for an integer field).
    config = types.GenerateContentConfig(top_k=40, seed=7, temperature=0, candidate_count=1)
    with _client(mock_url) as client:
        reply = client.models.generate_content(model="plan", contents=QUESTION, config=config)
    assert reply.candidates


def test_models_are_listed_and_described_under_v1beta(mock_url):
    with _client(mock_url, api_version="v1beta") as client:
        names = [m.name for m in client.models.list()]
        plan = client.models.get(model="plan")
        with pytest.raises(errors.ClientError) as caught:
            client.models.get(model="plann")
    assert "models/plan" in names and "models/runaway" in names
    assert plan.name == "models/plan" and plan.description.startswith("List, read, answer")
    assert (caught.value.code, caught.value.status) == (404, "NOT_FOUND")


def test_a_client_given_only_a_base_url_lists_and_gets_the_models_too(mock_url):
    # google-genai given only a base URL lists at GET /v1/models, OpenAI's path: a request that
    # names itself Google's client gets Google's listing there, any other still OpenAI's.
    with _client(mock_url) as client:
        names = [m.name for m in client.models.list()]
        plan = client.models.get(model="plan")
    assert "models/plan" in names and "models/runaway" in names
    assert plan.name == "models/plan"
    google = {"x-goog-api-client": "google-genai-sdk/1"}
    for path in ("/v1/models", "/v1/models/plan"):
        assert "x-request-id" not in httpx.get(mock_url.removesuffix("/v1") + path, headers=google).headers
    with openai.OpenAI(base_url=mock_url, api_key="unused") as chat_client:
        assert "plan" in [m.id for m in chat_client.models.list()]


CITY = {"name": "city", "turns": [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}},
                    {"name": "get_time", "id": "time-1", "arguments": {}}]},
    [{"if": {"tool_result_contains": "rain"}, "content": "Take an umbrella."}, {"content": "Enjoy the sun."}],
]}


@pytest.mark.parametrize(("weather", "answer"), [("rain", "Take an umbrella."), ("sun", "Enjoy the sun.")])
def test_a_scenario_file_answers_as_on_the_chat_route(serve_mock, weather, answer):
    question = [{"role": "user", "content": "Umbrella?"}]
    with serve_mock(scenario_files=[CITY]) as url, _client(url) as client:
        first = client.models.generate_content(model="city", contents="Umbrella?", config=OFFER)
        calls = first.function_calls
        answers = [types.Part.from_function_response(name=c.name, response={"result": weather})
                   for c in calls]
        contents = [types.Content(role="user", parts=[types.Part(text="Umbrella?")]),
                    first.candidates[0].content, types.Content(role="user", parts=answers)]
        second = client.models.generate_content(model="city", contents=contents, config=OFFER)
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as chat:
            chat_first = chat.chat.completions.create(model="city", messages=question, tools=_chat_tools())
            fed_back = [*question, chat_first.choices[0].message.model_dump(exclude_none=True),
                        *({"role": "tool", "tool_call_id": c.id, "content": weather}
                          for c in chat_first.choices[0].message.tool_calls)]
            chat_second = chat.chat.completions.create(model="city", messages=fed_back, tools=_chat_tools())
    assert [(c.id, c.name, c.args) for c in calls] == [
        ("call_0_0", "get_weather", {"city": "Zürich"}), ("time-1", "get_time", {})]
    assert second.text == answer
    assert first.usage_metadata.candidates_token_count == chat_first.usage.completion_tokens
    assert second.usage_metadata.prompt_token_count == chat_second.usage.prompt_tokens


def test_count_tokens_is_what_the_same_request_bills_as_its_prompt(mock_url):
    with _client(mock_url) as client:
        counted = client.models.count_tokens(model="plan", contents=QUESTION)
        billed = client.models.generate_content(model="plan", contents=QUESTION)
    assert counted.total_tokens == billed.usage_metadata.prompt_token_count
    declaration = {"name": "list_files", "parameters": SCHEMAS["list_files"]}
    body = {"systemInstruction": {"parts": [{"text": SYSTEM}]}, "contents": [{"parts": [{"text": QUESTION}]}],
            "tools": [{"functionDeclarations": [declaration]}]}
    with httpx.Client(base_url=_root(mock_url)) as http:
        whole = http.post("/v1beta/models/plan:countTokens", json={"generateContentRequest": body}).json()
        prompt = http.post("/v1beta/models/plan:generateContent", json=body).json()["usageMetadata"]
    assert whole["totalTokens"] == prompt["promptTokenCount"] > counted.total_tokens


ANSWER_TURN = [
    types.Content(role="user", parts=[types.Part(text=QUESTION)]),
    types.Content(role="model", parts=[types.Part(text="Listing.")]),
    types.Content(role="user", parts=[types.Part(text="go on")]),
    types.Content(role="model", parts=[types.Part(text="Reading.")]),
    types.Content(role="user", parts=[types.Part(text="go on")]),
]


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
def test_max_output_tokens_cuts_the_reply_and_bills_exactly_the_limit(mock_url, stream):
    with _client(mock_url) as client:
        reply = _generate(client, ANSWER_TURN, stream=stream, max_output_tokens=4)
    enc = o200k.encoding()
    assert reply.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert reply.text == enc.decode(enc.encode(ANSWER_PLAN)[:4])
    assert reply.usage_metadata.candidates_token_count == 4


READ_TURN = [
    types.Content(role="user", parts=[types.Part(text=QUESTION)]),
    types.Content(role="model", parts=[types.Part(text="Listing.")]),
    types.Content(role="user", parts=[types.Part(text="go on")]),
]
"""A request `plan` answers with `read_file {"path": "errors.log"}`."""


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
def test_a_call_cut_by_max_output_tokens_is_never_sent_with_arguments_it_did_not_have(mock_url, stream):
    # A functionCall's args is an object: a cut call cannot be sent in part, and one sent as
    # `{}` would be run (automatic function calling ignores finishReason) with the wrong arguments.
    with _client(mock_url) as client:
        whole = _generate(client, READ_TURN, stream=stream)
        limit = whole.usage_metadata.candidates_token_count - 1
        cut = _generate(client, READ_TURN, stream=stream, max_output_tokens=limit)
    assert [(c.name, c.args) for c in whole.function_calls] == [("read_file", {"path": "errors.log"})]
    assert cut.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert not cut.function_calls
    assert cut.usage_metadata.candidates_token_count == limit


def test_without_alt_sse_the_stream_is_one_json_array_of_the_same_responses(mock_url):
    body = {"contents": [c.model_dump(mode="json", exclude_none=True) for c in ANSWER_TURN]}
    path = "/v1beta/models/plan:streamGenerateContent"
    with httpx.Client(base_url=_root(mock_url)) as http:
        array = http.post(path, json=body)
        sse = http.post(path, params={"alt": "sse"}, json=body)
    events = [json.loads(line[len("data: "):]) for line in sse.text.split("\r\n\r\n") if line]
    assert array.headers["content-type"] == "application/json"
    assert sse.headers["content-type"].startswith("text/event-stream")

    def without_ids(responses: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "responseId"} for r in responses]

    assert without_ids(array.json()) == without_ids(events)
    assert "".join(e["candidates"][0]["content"]["parts"][0]["text"] for e in events) == ANSWER_PLAN
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"


def test_googles_own_rest_sample_is_served_as_google_serves_it(mock_url):
    # google-gemini/generative-ai-python samples/rest/function_calling.sh: a repeated field sent
    # as its single element (contents, parts) and an enum in lower case, which Google's parser reads.
    sample = {
        "system_instruction": {"parts": {"text": SYSTEM}},
        "tools": [{"function_declarations": [{"name": "list_files", "description": "List the files."}]}],
        "tool_config": {"function_calling_config": {"mode": "none"}},
        "contents": {"role": "user", "parts": {"text": QUESTION}},
    }
    with httpx.Client(base_url=_root(mock_url)) as http:
        reply = http.post("/v1beta/models/plan:generateContent", json=sample)
        listed = [{"role": "user", "parts": [{"text": QUESTION}]}]
        same = http.post("/v1beta/models/plan:generateContent", json={
            **sample, "system_instruction": {"parts": [{"text": SYSTEM}]}, "contents": listed})
        anything = http.post("/v1beta/models/plan:generateContent", json={
            **sample, "tool_config": {"function_calling_config": {"mode": "any"}}})
    assert reply.status_code == 200, reply.text
    assert "functionCall" not in reply.text  # mode none: text
    assert reply.json()["usageMetadata"] == same.json()["usageMetadata"]
    assert anything.json()["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "list_files"


def test_a_request_reads_into_the_transcript_the_anthropic_reader_makes_of_the_same_exchange():
    # One transcript shape for every format: checks made on it (unanswered calls, tools offered)
    # then hold in every format alike.
    gemini = generate_request({
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [
            {"role": "user", "parts": [{"text": QUESTION}]},
            {"role": "model", "parts": [{"text": "Listing."}, {"functionCall": {
                "id": "c1", "name": "read_file", "args": {"path": "errors.log"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "read_file", "response": {"result": "ok"}}},
                {"text": "go on"}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "read_file", "description": DESCRIPTIONS["read_file"],
                                             "parameters": SCHEMAS["read_file"]}]}],
        "generationConfig": {"maxOutputTokens": 7},
    }, model="plan", stream=False)
    claude = messages_request({
        "model": "plan", "max_tokens": 7, "system": SYSTEM,
        "messages": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, {
                "type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "errors.log"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                                         {"type": "text", "text": "go on"}]},
        ],
        "tools": [{"name": "read_file", "description": DESCRIPTIONS["read_file"],
                   "input_schema": SCHEMAS["read_file"]}],
    })
    assert gemini.messages == claude.messages
    assert (gemini.tools, gemini.max_tokens) == (claude.tools, claude.max_tokens)


# --- keys, faults and retries ----------------------------------------------------------------


def test_api_key_is_accepted_as_x_goog_api_key_or_the_key_query_parameter(keyed_mock_url):
    with _client(keyed_mock_url, api_key="wrong") as client, pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="plan", contents=QUESTION)
    assert (caught.value.code, caught.value.status) == (401, "UNAUTHENTICATED")
    with _client(keyed_mock_url, api_key="secret") as client:
        reply = client.models.generate_content(model="plan", contents=QUESTION, config=OFFER)
    assert reply.function_calls[0].name == "list_files"
    body = {"contents": [{"parts": [{"text": QUESTION}]}]}
    with httpx.Client(base_url=_root(keyed_mock_url)) as http:
        path = "/v1beta/models/plan:generateContent"
        assert http.post(path, params={"key": "secret"}, json=body).is_success
        assert http.get("/v1beta/models", params={"key": "secret"}).is_success
        assert http.get("/v1beta/models").json()["error"]["status"] == "UNAUTHENTICATED"


def _attempts(caplog: pytest.LogCaptureFixture, turn: int = 0) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"turn={turn} " in r.getMessage()]


def test_a_rate_limit_is_google_shaped_and_says_when_to_retry(mock_url):
    with _client(mock_url) as client, pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="plan+fault=429+retry=1500", contents="rate me")
    error = caught.value.details["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["details"] == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]


def test_a_rate_limit_says_when_to_retry_in_its_body_only(mock_url):
    # Google states the delay in RetryInfo; Retry-After and OpenAI's retry-after-ms are not its headers.
    with httpx.Client(base_url=_root(mock_url)) as http:
        response = http.post("/v1beta/models/plan+fault=429+retry=1500:generateContent", json=ok())
    assert response.status_code == 429
    assert not {"retry-after", "retry-after-ms"} & response.headers.keys(), response.headers


@pytest.mark.parametrize("kind", ["429", "500"])
def test_the_client_retries_past_a_fault_as_it_retries_the_real_service(mock_url, caplog, kind):
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = f"plan+fault={kind}@0x2"
    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
    with _client(mock_url, retry_options=retry) as client:
        reply = client.models.generate_content(model=model, contents=f"retry {kind}", config=OFFER)
    assert reply.function_calls[0].id == "c1"
    assert _attempts(caplog) == [
        f"model={model} turn=0 attempt=0 status={kind}",
        f"model={model} turn=0 attempt=1 status={kind}",
        f"model={model} turn=0 attempt=2 status=ok",
    ]


def test_an_overload_fault_is_googles_503_unavailable_and_the_client_retries_past_it(mock_url, caplog):
    # Google's overload is 503 UNAVAILABLE, which google-genai retries; it never sends a 529.
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = "plan+fault=529@0x2"
    with _client(mock_url) as client, pytest.raises(errors.ServerError) as caught:
        client.models.generate_content(model="plan+fault=529", contents="overloaded", config=OFFER)
    assert (caught.value.code, caught.value.status) == (503, "UNAVAILABLE")
    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
    with _client(mock_url, retry_options=retry) as client:
        reply = client.models.generate_content(model=model, contents="retry 529", config=OFFER)
    assert reply.function_calls[0].id == "c1"
    assert [m.rpartition(" ")[2] for m in _attempts(caplog)][-3:] == ["status=529", "status=529", "status=ok"]


def test_a_stream_error_arrives_after_n_chunks_as_the_sdk_meets_a_real_one(mock_url):
    # Google's stream carries an error object as a data line; google-genai raises it mid-iteration.
    received = []
    with _client(mock_url) as client, pytest.raises(errors.ServerError) as caught:
        for chunk in client.models.generate_content_stream(
                model="plan+fault=stream_error:3@2", contents=ANSWER_TURN, config=OFFER):
            received.append(chunk)
    assert len(received) == 3 and all(chunk.text for chunk in received)
    assert (caught.value.code, caught.value.status) == (500, "INTERNAL")
    with httpx.Client(base_url=_root(mock_url)) as http:
        array = http.post("/v1beta/models/plan+fault=stream_error:2@2:streamGenerateContent",
                          json={"contents": [c.model_dump(exclude_none=True) for c in ANSWER_TURN]})
    elements = array.json()  # still one JSON array, its last element the error
    assert len(elements) == 3 and elements[-1]["error"]["status"] == "INTERNAL"


def test_a_dropped_stream_breaks_off_mid_iteration(mock_url):
    received = []
    # google-genai reads through its own copy of httpx, whose errors are its own classes.
    with _client(mock_url) as client, pytest.raises(Exception) as caught:
        for chunk in client.models.generate_content_stream(
                model="plan+fault=drop:3@2", contents=ANSWER_TURN, config=OFFER):
            received.append(chunk)
    assert len(received) == 3
    assert type(caught.value).__name__ == "RemoteProtocolError" and "incomplete" in str(caught.value)


def test_the_same_request_sent_again_after_a_reply_meets_the_fault_again(mock_url, caplog):
    # An OpenAI client's fresh call says attempt 0 whatever came before; so is an identical
    # request here once the last one was answered, and a run repeated meets its faults again.
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = "plan+fault=429@0"
    retry = types.HttpRetryOptions(attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
    with _client(mock_url, retry_options=retry) as client:
        for _ in range(2):
            reply = client.models.generate_content(model=model, contents="run twice", config=OFFER)
            assert reply.function_calls
    assert [m.rpartition(" ")[2] for m in _attempts(caplog)] == ["status=429", "status=ok"] * 2


def test_a_client_that_does_not_retry_sees_the_fault_as_the_real_service_would_send_it(mock_url):
    with _client(mock_url) as client, pytest.raises(errors.ServerError) as caught:
        client.models.generate_content(model="plan+fault=500", contents="no retry")
    assert (caught.value.code, caught.value.status) == (500, "INTERNAL")


def test_options_in_the_base_url_prefix_apply(mock_url):
    with _client(mock_url.replace("/v1", "/o/fault=500/v1")) as client:
        with pytest.raises(errors.ServerError) as caught:
            client.models.generate_content(model="plan", contents="hi")
    assert caught.value.status == "INTERNAL"


# --- bad input: Google's error shape, never a 500 ---------------------------------------------

USER = {"role": "user", "parts": [{"text": "hi"}]}
CALL = {"role": "model", "parts": [{"functionCall": {"name": "list_files", "args": {}}}]}


def ok(**fields) -> dict:
    return {"contents": [USER], **fields}


def answered(response: dict) -> list[dict]:
    return [USER, CALL, {"role": "user", "parts": [{"functionResponse": response}]}]


BAD = {
    "malformed_json": b'{"contents": [',
    "body_is_array": [ok()],
    "missing_contents": {},
    "empty_contents": ok(contents=[]),
    "contents_not_array": ok(contents="hi"),
    "content_not_object": ok(contents=["hi"]),
    "bad_role": ok(contents=[{"role": "system", "parts": [{"text": "hi"}]}]),
    "missing_parts": ok(contents=[{"role": "user"}]),
    "empty_parts": ok(contents=[{"role": "user", "parts": []}]),
    "part_not_object": ok(contents=[{"role": "user", "parts": ["hi"]}]),
    "empty_part": ok(contents=[{"role": "user", "parts": [{}]}]),
    "two_kinds_in_one_part": ok(contents=[{"role": "user", "parts": [{"text": "a",
                                                                      "functionResponse": {}}]}]),
    "text_not_string": ok(contents=[{"role": "user", "parts": [{"text": 5}]}]),
    "inline_data": ok(contents=[{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png"}}]}]),
    "function_call_in_user_content": ok(contents=[{"role": "user", "parts": CALL["parts"]}]),
    "function_call_args_not_object": ok(contents=[USER, {"role": "model", "parts": [
        {"functionCall": {"name": "list_files", "args": [1]}}]}]),
    "function_call_without_name": ok(contents=[USER, {"role": "model", "parts": [{"functionCall": {}}]}]),
    "orphan_function_response": ok(contents=[USER, {"role": "user", "parts": [
        {"functionResponse": {"name": "list_files", "response": {"result": "x"}}}]}]),
    "function_response_for_another_name": ok(contents=answered({"name": "read_file", "response": {}})),
    "function_response_for_unknown_id": ok(contents=answered({"id": "zz", "name": "list_files",
                                                              "response": {}})),
    "function_response_answered_twice": ok(contents=[*answered({"name": "list_files", "response": {}}),
                                                     {"role": "user", "parts": [{"functionResponse": {
                                                         "name": "list_files", "response": {}}}]}]),
    "function_response_not_object": ok(contents=answered({"name": "list_files", "response": "x"})),
    "system_instruction_not_content": ok(systemInstruction="be brief"),
    "system_instruction_with_call": ok(systemInstruction={"parts": CALL["parts"]}),
    "tools_not_array": ok(tools={"functionDeclarations": []}),
    "search_tool": ok(tools=[{"googleSearch": {}}]),
    "declaration_without_name": ok(tools=[{"functionDeclarations": [{"description": "x"}]}]),
    "declaration_schema_not_object": ok(tools=[{"functionDeclarations": [{"name": "f", "parameters": 1}]}]),
    "max_output_tokens_zero": ok(generationConfig={"maxOutputTokens": 0}),
    "max_output_tokens_string": ok(generationConfig={"maxOutputTokens": "10"}),
    "max_output_tokens_past_int32": ok(generationConfig={"maxOutputTokens": 2**31}),  # a TYPE_INT32 field
    "generation_config_not_object": ok(generationConfig=[]),
    "two_candidates": ok(generationConfig={"candidateCount": 2}),
    "candidate_count_true": ok(generationConfig={"candidateCount": True}),
    "bad_options": "plan+fault=nope",
    "unknown_model": "plann",
}
"""Each answered 400 INVALID_ARGUMENT, except the unknown model: 404 NOT_FOUND."""


def _assert_google_error(response: httpx.Response, code: int, status: str) -> dict:
    body = response.json()
    assert response.status_code == code, body
    assert set(body) == {"error"}
    assert {"code", "message", "status"} <= set(body["error"])
    assert (body["error"]["code"], body["error"]["status"]) == (code, status)
    assert body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
def test_bad_input_gets_a_google_shaped_error_never_a_500(mock_url, body):
    model = body if isinstance(body, str) else "plan"
    content = body if isinstance(body, bytes) else json.dumps(ok() if isinstance(body, str) else body)
    with httpx.Client(base_url=_root(mock_url)) as http:
        response = http.post(f"/v1beta/models/{model}:generateContent", content=content,
                             headers={"content-type": "application/json"})
        assert http.get("/v1beta/models").status_code == 200, "the server keeps serving"
    if body == "plann":
        _assert_google_error(response, 404, "NOT_FOUND")
    else:
        _assert_google_error(response, 400, "INVALID_ARGUMENT")


def test_an_orphan_function_response_names_the_part(mock_url):
    with httpx.Client(base_url=_root(mock_url)) as http:
        response = http.post("/v1beta/models/plan:generateContent", json=BAD["orphan_function_response"])
    message = _assert_google_error(response, 400, "INVALID_ARGUMENT")["message"]
    # Gemini's own words (langchain-ai/langchain#27799), then which part and which name.
    assert message.startswith("Please ensure that function response turn comes immediately after a "
                              "function call turn.")
    assert "contents[1].parts[0].functionResponse" in message and "'list_files'" in message


UNANSWERED_CALLS = (
    "Please ensure that the number of function response parts is equal to the number of function "
    "call parts of the function call turn."
)
"""Gemini's own 400 (google-gemini/gemini-cli#4217, #5443: INVALID_ARGUMENT)."""
TWO_CALLS = {"role": "model", "parts": [{"functionCall": {"name": "list_files", "args": {}}},
                                        {"functionCall": {"name": "read_file", "args": {"path": "a"}}}]}


def test_a_function_call_left_unanswered_is_refused_as_gemini_refuses_it(mock_url):
    # The cancelled run: the model's call is followed by the user's next words, not its response.
    cancelled = [types.Content(role="user", parts=[types.Part(text=QUESTION)]),
                 types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(
                     name="list_files", args={}))]),
                 types.Content(role="user", parts=[types.Part(text="Never mind, just answer.")])]
    with _client(mock_url) as client, pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="plan", contents=cancelled, config=OFFER)
    assert (caught.value.code, caught.value.status, caught.value.message) == (
        400, "INVALID_ARGUMENT", UNANSWERED_CALLS)
    one_of_two = [USER, TWO_CALLS, {"role": "user", "parts": [
        {"functionResponse": {"name": "list_files", "response": {"result": "a"}}}]}]
    with httpx.Client(base_url=_root(mock_url)) as http:
        response = http.post("/v1beta/models/plan:generateContent", json=ok(contents=one_of_two))
    assert _assert_google_error(response, 400, "INVALID_ARGUMENT")["message"] == UNANSWERED_CALLS


def test_a_500_from_a_bug_in_the_mock_is_google_shaped_too(monkeypatch):
    from mockprovider.apis import gemini as gemini_api

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(gemini_api, "body", broken)
    with serve_in_thread() as url, _client(url) as client, pytest.raises(errors.ServerError) as caught:
        client.models.generate_content(model="plan", contents="hi")
    assert (caught.value.code, caught.value.status) == (500, "INTERNAL")
    assert set(caught.value.details["error"]) == {"code", "message", "status"}


def test_transport_level_errors_are_google_shaped_too(serve_mock):
    limit, key = 10_000, {"x-goog-api-key": "secret"}
    path = "/v1beta/models/plan:generateContent"
    cases = [
        ("POST", path, {"json": ok()}, 401, "UNAUTHENTICATED"),
        ("POST", path, {"content": b"{}", "headers": key}, 415, "INVALID_ARGUMENT"),
        ("POST", path, {"json": ok(padding="x" * limit), "headers": key}, 413, "INVALID_ARGUMENT"),
        ("GET", path, {"headers": key}, 405, "UNIMPLEMENTED"),
        ("POST", "/v1beta/models/plan:generateAnswer", {"json": ok(), "headers": key}, 404, "NOT_FOUND"),
        ("POST", "/v1beta/cachedContents", {"json": {}, "headers": key}, 404, "NOT_FOUND"),
        ("POST", "/v1beta/models/plan:streamGenerateContent?alt=proto", {"json": ok(), "headers": key},
         400, "INVALID_ARGUMENT"),
    ]
    with serve_mock(max_body_bytes=limit, api_key="secret") as url, httpx.Client(base_url=_root(url)) as http:
        for method, where, kwargs, code, status in cases:
            _assert_google_error(http.request(method, where, **kwargs), code, status)
        assert http.post(path, json=ok(), headers=key).status_code == 200


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


NESTED = {
    "args": ('{"contents":[{"parts":[{"text":"q"}]},{"role":"model","parts":[{"functionCall":'
             '{"name":"f","args":%s}}]}]}', "generateContent"),
    "response": ('{"contents":[{"parts":[{"text":"q"}]},{"role":"model","parts":[{"functionCall":'
                 '{"name":"f"}}]},{"parts":[{"functionResponse":{"name":"f","response":%s}}]}]}',
                 "generateContent"),
    "schema": ('{"contents":[{"parts":[{"text":"q"}]}],"tools":[{"functionDeclarations":'
               '[{"name":"f","parameters":%s}]}]}', "streamGenerateContent"),
    "count_tokens": ('{"contents":[{"parts":[{"text":"q"}]}],"tools":[{"functionDeclarations":'
                     '[{"name":"f","parameters":%s}]}]}', "countTokens"),
}


@pytest.mark.parametrize("where", NESTED)
def test_a_body_nested_near_the_parsers_limit_gets_a_reply_or_a_google_error(in_process, where):
    # Nesting the parser just accepts can overflow the stack later, where the request is counted.
    template, method = NESTED[where]
    for depth in range(900, 1000):
        response = in_process.post(f"/v1beta/models/plan:{method}", content=template % _nested(depth),
                                   headers={"content-type": "application/json"})
        assert response.status_code in (200, 400), (depth, response.text[:200])
        if response.status_code == 400:
            assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


PART = (
    st.fixed_dictionaries({"text": TEXT | JSON_VALUE})
    | st.fixed_dictionaries({"functionCall": st.fixed_dictionaries(
        {"name": st.just("list_files") | TEXT}, optional={"id": TEXT | JSON_VALUE, "args": JSON_VALUE})})
    | st.fixed_dictionaries({"functionResponse": st.fixed_dictionaries(
        {"name": st.just("list_files") | JSON_VALUE,
         "response": st.dictionaries(TEXT, JSON_VALUE) | JSON_VALUE},
        optional={"id": TEXT})})
    | JSON_VALUE
)
CONTENT = st.fixed_dictionaries({"role": st.sampled_from(["user", "model"]) | JSON_VALUE,
                                 "parts": st.lists(PART, max_size=3) | JSON_VALUE})
WILD = st.fixed_dictionaries(
    {"contents": st.lists(CONTENT, max_size=4) | JSON_VALUE},
    optional={
        "systemInstruction": st.fixed_dictionaries({"parts": st.lists(PART, max_size=2)}) | JSON_VALUE,
        "tools": st.lists(st.fixed_dictionaries({"functionDeclarations": st.lists(
            st.dictionaries(st.sampled_from(["name", "description", "parameters"]), JSON_VALUE),
            max_size=2)})) | JSON_VALUE,
        "generationConfig": st.fixed_dictionaries(
            {}, optional={"maxOutputTokens": st.integers(-2, 40) | JSON_VALUE}) | JSON_VALUE,
    },
)


@FUZZ
@given(body=WILD, method=st.sampled_from(["generateContent", "streamGenerateContent"]))
def test_generated_bodies_get_a_reply_or_a_google_error_never_a_500(in_process, body, method):
    response = post_generated(in_process, f"/v1beta/models/plan:{method}", body)
    if response.status_code == 200:
        replies = response.json() if method == "streamGenerateContent" else [response.json()]
        assert replies and "finishReason" in replies[-1]["candidates"][0]
    else:
        assert 400 <= response.status_code < 500
        assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_long_conversation_reports_its_cached_prefix(mock_url):
    """cachedContentTokenCount, a part of the prompt, read by the official client as from the real API."""
    contents: list = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]
    with _client(mock_url) as client:
        usages = []
        while not usages or usages[-1].prompt_token_count < 1200:
            reply = _generate(client, contents, stream=False, model="runaway")
            usages.append(reply.usage_metadata)
            contents.append(reply.candidates[0].content)
            result = {"result": RESULTS["list_files"]}
            answers = [types.Part(function_response=types.FunctionResponse(
                id=c.id, name=c.name, response=result)) for c in reply.function_calls]
            contents.append(types.Content(role="user", parts=answers))
        streamed = _generate(client, contents, stream=True, model="runaway").usage_metadata
    short = [u for u in usages if u.prompt_token_count < 1024]
    assert short and all(u.cached_content_token_count is None for u in short)
    last = usages[-1]
    assert 1024 <= last.cached_content_token_count < last.prompt_token_count
    assert last.cached_content_token_count % 128 == 0
    assert last.total_token_count == last.prompt_token_count + last.candidates_token_count
    assert streamed.cached_content_token_count >= last.cached_content_token_count


def test_a_reply_that_thinks_reports_its_thoughts_apart_from_the_candidates():
    thinker = {"name": "thinker", "turns": [{"content": "Two.", "reasoning": "One plus one is two."}]}
    with serve_in_thread(create_app(scenario_files=[thinker])) as url, _client(url) as client:
        for stream in (False, True):
            usage = _generate(client, [QUESTION], stream=stream, model="thinker").usage_metadata
            thoughts, answer = o200k.count("One plus one is two."), o200k.count("Two.")
            assert (usage.thoughts_token_count, usage.candidates_token_count) == (thoughts, answer)
            assert usage.total_token_count == usage.prompt_token_count + thoughts + answer
