"""Ollama's /api/chat: the official `ollama` client drives the scripts unchanged."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import ollama
import openai
import pytest
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated
from hypothesis import given
from hypothesis import strategies as st

import o200k
from mockprovider.apis.anthropic import messages_request
from mockprovider.apis.ollama import chat_request
from mockprovider.scripts.scenarios import ANSWER_PLAN

QUESTION = "Which file mentions a timeout?"
SYSTEM = "You answer questions about log files."
TOOLS = [
    {"type": "function", "function": {"name": "list_files", "description": "List the files.",
                                      "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read one file.",
                                      "parameters": {"type": "object",
                                                     "properties": {"path": {"type": "string"}}}}},
]
RESULTS = {"list_files": "errors.log\naccess.log\nnotes.txt", "read_file": "worker 7 timed out"}


def _root(mock_url: str) -> str:
    """The ollama client's host: it appends `/api/chat` itself."""
    return mock_url.removesuffix("/v1")


def _chat(client: ollama.Client, messages: list, *, stream: bool, **kwargs) -> ollama.ChatResponse:
    """One reply; a stream's parts joined into the reply they make up."""
    if not stream:
        return client.chat(model="plan", messages=messages, tools=TOOLS, **kwargs)
    parts = list(client.chat(model="plan", messages=messages, tools=TOOLS, stream=True, **kwargs))
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert all(p.eval_count is None for p in parts[:-1]), "only the last part carries the counts"
    message = ollama.Message(
        role="assistant",
        content="".join(p.message.content or "" for p in parts),
        tool_calls=[c for p in parts for c in p.message.tool_calls or []] or None,
    )
    return parts[-1].model_copy(update={"message": message})


def _drive_plan(client: ollama.Client, *, stream: bool) -> tuple[list, list[list[dict]]]:
    """Three turns of `plan`, each reply and its tool messages fed back as the client's README
    shows. Returns the replies and, beside them, the chat-shaped conversation each request stood
    for (built here, not by the mock), for counting tokens independently: the client sends no
    call ids, so the mock names a call `call_{turn}_{index}`."""
    messages: list = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    chat: list[dict] = list(messages)
    replies, conversations = [], []
    for turn in range(3):
        reply = _chat(client, messages, stream=stream)
        replies.append(reply)
        conversations.append(list(chat))
        calls = reply.message.tool_calls or []
        messages.append(reply.message)
        messages += [{"role": "tool", "tool_name": c.function.name, "content": RESULTS[c.function.name]}
                     for c in calls]
        ids = [f"call_{turn}_{j}" for j in range(len(calls))]
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {
                "name": c.function.name,
                "arguments": json.dumps(c.function.arguments, separators=(",", ":"))}}
            for i, c in zip(ids, calls, strict=True)
        ]})
        chat += [{"role": "tool", "tool_call_id": i, "content": RESULTS[c.function.name]}
                 for i, c in zip(ids, calls, strict=True)]
    return replies, conversations


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
def test_official_client_with_tools_drives_plan_to_the_scripted_answer(mock_url, stream):
    with ollama.Client(host=_root(mock_url)) as client:
        replies, _ = _drive_plan(client, stream=stream)
    calls = [(c.function.name, dict(c.function.arguments)) for r in replies[:2] for c in r.message.tool_calls]
    assert calls == [("list_files", {}), ("read_file", {"path": "errors.log"})]
    assert [r.done_reason for r in replies] == ["stop"] * 3
    assert replies[-1].message.content == ANSWER_PLAN
    assert all(r.model == "plan" and r.done for r in replies)


def test_counts_are_the_chat_formula_and_prompts_grow_by_exactly_what_was_appended(mock_url):
    with ollama.Client(host=_root(mock_url)) as client:
        replies, conversations = _drive_plan(client, stream=False)
    prompts = [r.prompt_eval_count for r in replies]
    assert prompts == [o200k.prompt_tokens(c, TOOLS) for c in conversations]
    for t in (1, 2):
        appended = conversations[t][len(conversations[t - 1]):]
        assert prompts[t] - prompts[t - 1] == sum(o200k.message_tokens(m) for m in appended)
    assert replies[2].eval_count == o200k.count(ANSWER_PLAN)


def test_streamed_and_plain_replies_are_the_same(mock_url):
    with ollama.Client(host=_root(mock_url)) as client:
        streamed, _ = _drive_plan(client, stream=True)
        plain, _ = _drive_plan(client, stream=False)

    def essence(r: ollama.ChatResponse) -> tuple:
        return r.message.model_dump(), r.done_reason, r.prompt_eval_count, r.eval_count

    assert [essence(r) for r in streamed] == [essence(r) for r in plain]


def test_the_async_client_drives_plan_as_the_sync_one_does(mock_url):
    async def drive() -> tuple[ollama.ChatResponse, list[ollama.ChatResponse]]:
        client = ollama.AsyncClient(host=_root(mock_url))
        first = await client.chat(model="plan", messages=[{"role": "user", "content": QUESTION}], tools=TOOLS)
        parts = [part async for part in await client.chat(model="plan", messages=ANSWER_TURN, stream=True)]
        await client.close()
        return first, parts

    first, parts = asyncio.run(drive())
    assert first.message.tool_calls[0].function.name == "list_files"
    assert "".join(p.message.content for p in parts) == ANSWER_PLAN and parts[-1].done


def test_durations_add_up_and_the_latency_is_in_the_prompt_evaluation(mock_url):
    with ollama.Client(host=_root(mock_url)) as client:
        reply = client.chat(model="plan+latency=50", messages=[{"role": "user", "content": QUESTION}])
    assert reply.total_duration == reply.load_duration + reply.prompt_eval_duration + reply.eval_duration
    assert reply.prompt_eval_duration >= 50_000_000 and reply.eval_duration > 0


ANSWER_TURN = [
    {"role": "user", "content": QUESTION},
    {"role": "assistant", "content": "Listing."},
    {"role": "user", "content": "go on"},
    {"role": "assistant", "content": "Reading."},
    {"role": "user", "content": "go on"},
]


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
def test_num_predict_cuts_the_reply_and_counts_exactly_the_limit(mock_url, stream):
    with ollama.Client(host=_root(mock_url)) as client:
        reply = _chat(client, ANSWER_TURN, stream=stream, options={"num_predict": 4})
        unlimited = _chat(client, ANSWER_TURN, stream=stream, options={"num_predict": -1})
    enc = o200k.encoding()
    assert reply.done_reason == "length"
    assert reply.message.content == enc.decode(enc.encode(ANSWER_PLAN)[:4])
    assert reply.eval_count == 4
    assert (unlimited.done_reason, unlimited.message.content) == ("stop", ANSWER_PLAN)


def test_num_predict_sent_as_a_json_float_counts_as_its_whole_part(mock_url):
    # Ollama reads options as JSON numbers (float64) and truncates an integer option's value.
    with ollama.Client(host=_root(mock_url)) as client:
        reply = _chat(client, ANSWER_TURN, stream=False, options={"num_predict": 4.9})
        with pytest.raises(ollama.ResponseError) as caught:
            _chat(client, ANSWER_TURN, stream=False, options={"num_predict": "4"})
    assert (reply.done_reason, reply.eval_count) == ("length", 4)
    assert caught.value.status_code == 400 and "num_predict" in caught.value.error


READ_TURN = ANSWER_TURN[:3]
"""A request `plan` answers with `read_file {"path": "errors.log"}`."""


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "stream"])
def test_a_call_cut_by_num_predict_is_never_sent_with_arguments_it_did_not_have(mock_url, stream):
    # A tool call's arguments are an object: a cut call cannot be sent in part, and one sent as
    # `{}` reads as a whole call with the wrong arguments.
    with ollama.Client(host=_root(mock_url)) as client:
        whole = _chat(client, READ_TURN, stream=stream)
        cut = _chat(client, READ_TURN, stream=stream, options={"num_predict": whole.eval_count - 1})
    assert [(c.function.name, dict(c.function.arguments)) for c in whole.message.tool_calls] == [
        ("read_file", {"path": "errors.log"})]
    assert (cut.done_reason, cut.message.tool_calls) == ("length", None)
    assert cut.eval_count == whole.eval_count - 1


def test_models_are_listed_and_shown_under_their_default_tag(mock_url):
    with ollama.Client(host=_root(mock_url)) as client:
        names = [m.model for m in client.list().models]
        shown = client.show("plan:latest")
        asked = [{"role": "user", "content": QUESTION}]
        reply = client.chat(model="plan:latest", messages=asked, tools=TOOLS)
        with pytest.raises(ollama.ResponseError) as caught:
            client.show("plann")
    assert "plan:latest" in names and "runaway:latest" in names
    assert "tools" in shown.capabilities and shown.modelinfo["general.basename"] == "plan"
    assert reply.message.tool_calls[0].function.name == "list_files"
    assert caught.value.status_code == 404 and "'plann'" in caught.value.error


@pytest.mark.parametrize("model", ["plan:latest", "plan+latency=1:latest"])
def test_a_reply_echoes_the_model_name_as_sent_tag_included(mock_url, model):
    # Ollama's chat handler answers with the request's own model string.
    asked = [{"role": "user", "content": QUESTION}]
    with ollama.Client(host=_root(mock_url)) as client:
        plain = client.chat(model=model, messages=asked, tools=TOOLS)
        streamed = list(client.chat(model=model, messages=asked, tools=TOOLS, stream=True))
        loaded = client.chat(model=model)
    assert [plain.model, loaded.model] + [chunk.model for chunk in streamed] == [model] * (2 + len(streamed))


@pytest.mark.parametrize("model", ["plan:latest+fault=500", "plan+fault=500:latest"])
def test_options_follow_the_model_name_with_or_without_its_tag(mock_url, model):
    with ollama.Client(host=_root(mock_url)) as client, pytest.raises(ollama.ResponseError) as caught:
        client.chat(model=model, messages=[{"role": "user", "content": f"tagged {model}"}])
    assert caught.value.status_code == 500 and "injected fault" in caught.value.error


def test_a_request_with_no_messages_loads_the_model(mock_url):
    with ollama.Client(host=_root(mock_url)) as client:
        reply = client.chat(model="plan")
    assert (reply.done, reply.done_reason, reply.message.content) == (True, "load", "")


def test_a_request_with_no_messages_and_keep_alive_zero_unloads_the_model(mock_url):
    # Ollama's chat handler: no messages and keep_alive 0 expires the runner ("unload").
    with ollama.Client(host=_root(mock_url)) as client:
        unloaded = [client.chat(model="plan", keep_alive=k).done_reason for k in (0, "0s", "0")]
        kept = client.chat(model="plan", keep_alive="5m").done_reason
    assert (unloaded, kept) == (["unload"] * 3, "load")


def test_a_keep_alive_of_many_zeros_without_a_unit_is_answered_without_stalling_the_server(mock_url):
    # keep_alive is client input read by a pattern: it must not backtrack without end on a long run of zeros.
    body = {"model": "plan", "keep_alive": "0" * 40 + "x"}
    reply = httpx.post(_root(mock_url) + "/api/chat", json=body, timeout=10)
    assert (reply.status_code, reply.json()["done_reason"]) == (200, "load")


def test_a_curl_request_without_a_content_type_streams_ndjson(mock_url):
    # Ollama's own examples use `curl -d`, which sends a form content type.
    body = json.dumps({"model": "plan", "messages": ANSWER_TURN}).encode()
    with httpx.Client(base_url=_root(mock_url)) as http:
        response = http.post("/api/chat", content=body,
                             headers={"content-type": "application/x-www-form-urlencoded"})
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert response.headers["content-type"] == "application/x-ndjson"
    assert "".join(line["message"]["content"] for line in lines) == ANSWER_PLAN
    assert lines[-1]["done"] and lines[-1]["eval_count"] == o200k.count(ANSWER_PLAN)


def test_tool_call_ids_are_honoured_when_the_request_carries_them(mock_url):
    call = {"id": "c1", "function": {"name": "list_files", "arguments": {}}}
    messages = [{"role": "user", "content": QUESTION},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "errors.log"}]
    chat = [{"role": "user", "content": QUESTION},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "errors.log"}]
    with httpx.Client(base_url=_root(mock_url)) as http:
        body = {"model": "plan", "messages": messages, "stream": False, "tools": TOOLS}
        reply = http.post("/api/chat", json=body).json()
    assert reply["message"]["tool_calls"] == [
        {"id": "c2", "function": {"index": 0, "name": "read_file", "arguments": {"path": "errors.log"}}}
    ]
    assert reply["prompt_eval_count"] == o200k.prompt_tokens(chat, TOOLS)


CITY = {"name": "city", "turns": [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}},
                    {"name": "get_time", "id": "time-1", "arguments": {}}]},
    [{"if": {"tool_result_contains": "rain"}, "content": "Take an umbrella."}, {"content": "Enjoy the sun."}],
]}


@pytest.mark.parametrize(("weather", "answer"), [("rain", "Take an umbrella."), ("sun", "Enjoy the sun.")])
def test_a_scenario_file_answers_with_its_calls_and_its_condition(serve_mock, weather, answer):
    question = [{"role": "user", "content": "Umbrella?"}]
    with serve_mock(scenario_files=[CITY]) as url, ollama.Client(host=_root(url)) as client:
        first = client.chat(model="city", messages=question, tools=TOOLS)
        calls = first.message.tool_calls
        results = [{"role": "tool", "tool_name": c.function.name, "content": weather} for c in calls]
        second = client.chat(model="city", messages=[*question, first.message, *results], tools=TOOLS)
        with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as chat:
            chat_first = chat.chat.completions.create(model="city", messages=question, tools=TOOLS)
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Zürich"}), ("get_time", {})]
    assert second.message.content == answer
    assert first.eval_count == chat_first.usage.completion_tokens


def test_a_request_reads_into_the_transcript_the_anthropic_reader_makes_of_the_same_exchange():
    # One transcript shape for every format: checks made on it (unanswered calls, tools offered)
    # then hold in every format alike.
    call = {"id": "c1", "function": {"name": "read_file", "arguments": {"path": "errors.log"}}}
    read = chat_request({
        "model": "plan:latest", "options": {"num_predict": 7},
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "Listing.", "tool_calls": [call]},
            {"role": "tool", "tool_name": "read_file", "content": "ok"},
            {"role": "user", "content": "go on"},
        ],
        "tools": TOOLS[1:],
    })
    claude = messages_request({
        "model": "plan", "max_tokens": 7, "system": SYSTEM,
        "messages": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, {
                "type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "errors.log"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                                         {"type": "text", "text": "go on"}]},
        ],
        "tools": [{"name": "read_file", "description": "Read one file.",
                   "input_schema": TOOLS[1]["function"]["parameters"]}],
    })
    assert (read.model, read.stream) == ("plan", True)
    assert (read.messages, read.tools, read.max_tokens) == (claude.messages, claude.tools, claude.max_tokens)


# --- faults: the ollama client does not retry, so the fault reaches the caller ---------------------


@pytest.mark.parametrize(("kind", "status"), [("429", 429), ("500", 500), ("401", 401), ("529", 503)])
def test_a_fault_reaches_the_caller_and_the_callers_own_retry_passes(mock_url, caplog, kind, status):
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = f"plan+fault={kind}@0"
    question = [{"role": "user", "content": f"fault {kind}"}]
    with ollama.Client(host=_root(mock_url)) as client:
        with pytest.raises(ollama.ResponseError) as caught:
            client.chat(model=model, messages=question, tools=TOOLS)
        reply = client.chat(model=model, messages=question, tools=TOOLS)
    assert caught.value.status_code == status and "injected fault" in caught.value.error
    assert reply.message.tool_calls[0].function.name == "list_files"
    assert [r.getMessage() for r in caplog.records if "turn=0 " in r.getMessage()] == [
        f"model={model} turn=0 attempt=0 status={kind}",
        f"model={model} turn=0 attempt=1 status=ok",
    ]


def test_a_stream_error_arrives_after_n_lines_as_ollamas_error_line(mock_url):
    # Ollama reports a failure after its stream started as an {"error": ...} line.
    received = []
    with ollama.Client(host=_root(mock_url)) as client, pytest.raises(ollama.ResponseError) as caught:
        for part in client.chat(model="plan+fault=stream_error:3@2", messages=ANSWER_TURN, stream=True):
            received.append(part)
    assert len(received) == 3 and not any(part.done for part in received)
    assert "injected fault" in caught.value.error


def test_the_callers_retry_after_a_stream_error_is_the_next_attempt(mock_url):
    # A reply the fault broke was not an answer: sent again, the request is attempt 1 and passes.
    asked = [*ANSWER_TURN[:-1], {"role": "user", "content": "retry after a broken stream"}]
    with ollama.Client(host=_root(mock_url)) as client:
        with pytest.raises(ollama.ResponseError):
            list(client.chat(model="plan+fault=stream_error:1@2", messages=asked, stream=True))
        parts = list(client.chat(model="plan+fault=stream_error:1@2", messages=asked, stream=True))
    assert parts[-1].done and parts[-1].done_reason == "stop"


def test_a_dropped_stream_breaks_off_mid_iteration(mock_url):
    received = []
    with ollama.Client(host=_root(mock_url)) as client, pytest.raises(httpx.TransportError):
        for part in client.chat(model="plan+fault=drop:3@2", messages=ANSWER_TURN, stream=True):
            received.append(part)
    assert len(received) == 3


def test_options_in_the_host_path_prefix_apply(mock_url):
    with ollama.Client(host=_root(mock_url) + "/o/fault=500") as client:
        with pytest.raises(ollama.ResponseError) as caught:
            client.chat(model="plan", messages=[{"role": "user", "content": "prefix"}])
    assert caught.value.status_code == 500


def test_api_key_is_read_as_a_bearer_token(keyed_mock_url):
    question = [{"role": "user", "content": QUESTION}]
    with ollama.Client(host=_root(keyed_mock_url)) as client, pytest.raises(ollama.ResponseError) as caught:
        client.chat(model="plan", messages=question)
    assert caught.value.status_code == 401
    with ollama.Client(host=_root(keyed_mock_url), headers={"authorization": "Bearer secret"}) as client:
        assert client.chat(model="plan", messages=question, tools=TOOLS).message.tool_calls


# --- bad input: Ollama's error shape, never a 500 ---------------------------------------------

USER = {"role": "user", "content": "hi"}
CALL = {"role": "assistant", "tool_calls": [{"function": {"name": "list_files", "arguments": {}}}]}


def ok(**fields) -> dict:
    return {"model": "plan", "messages": [USER], "stream": False, **fields}


BAD = {
    "malformed_json": b'{"model": "plan",',
    "body_is_array": [ok()],
    "missing_model": {"messages": [USER]},
    "model_not_string": ok(model=5),
    "messages_not_array": ok(messages={"role": "user"}),
    "message_not_object": ok(messages=["hi"]),
    "bad_role": ok(messages=[{"role": "developer", "content": "hi"}]),
    "content_not_string": ok(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
    "images": ok(messages=[{**USER, "images": ["aGk="]}]),
    "tool_calls_not_array": ok(messages=[USER, {"role": "assistant", "tool_calls": {}}]),
    "tool_call_without_function": ok(messages=[USER, {"role": "assistant", "tool_calls": [{"name": "f"}]}]),
    "tool_call_arguments_string": ok(messages=[USER, {"role": "assistant", "tool_calls": [
        {"function": {"name": "list_files", "arguments": "{}"}}]}]),
    "orphan_tool_message": ok(messages=[USER, {"role": "tool", "content": "x"}]),
    "tool_message_for_another_tool": ok(messages=[USER, CALL, {"role": "tool", "tool_name": "read_file",
                                                                "content": "x"}]),
    "tool_message_for_unknown_id": ok(messages=[USER, CALL, {"role": "tool", "tool_call_id": "zz",
                                                              "content": "x"}]),
    "tool_message_answered_twice": ok(messages=[USER, CALL, {"role": "tool", "content": "x"},
                                                {"role": "tool", "content": "y"}]),
    "tools_not_array": ok(tools={"type": "function"}),
    "tool_without_function": ok(tools=[{"type": "function"}]),
    "tool_schema_not_object": ok(tools=[{"type": "function", "function": {"name": "f", "parameters": 1}}]),
    "options_not_object": ok(options=[1]),
    "num_predict_string": ok(options={"num_predict": "10"}),
    "stream_not_bool": ok(stream="yes"),
    "bad_options": ok(model="plan+fault=nope"),
    "unknown_model": ok(model="plann"),
}
"""Each answered 400, except the unknown model: 404."""


@pytest.mark.parametrize("body", BAD.values(), ids=BAD.keys())
def test_bad_input_gets_an_ollama_shaped_error_never_a_500(mock_url, body):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(base_url=_root(mock_url)) as http:
        response = http.post("/api/chat", content=content, headers={"content-type": "application/json"})
        assert http.get("/api/tags").status_code == 200, "the server keeps serving"
    assert response.status_code == (404 if body is BAD["unknown_model"] else 400)
    assert set(response.json()) == {"error"} and isinstance(response.json()["error"], str)
    assert response.json()["error"]


def test_an_orphan_tool_message_names_the_message(mock_url):
    with ollama.Client(host=_root(mock_url)) as client, pytest.raises(ollama.ResponseError) as caught:
        orphan = {"role": "tool", "tool_name": "list_files", "content": "x"}
        client.chat(model="plan", messages=[USER, orphan])
    assert caught.value.status_code == 400
    assert "messages[1]" in caught.value.error and "'list_files'" in caught.value.error


def test_a_500_from_a_bug_in_the_mock_is_ollama_shaped_too(monkeypatch):
    from mockprovider.apis import ollama as ollama_api
    from mockprovider.server import serve_in_thread

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(ollama_api, "body", broken)
    with serve_in_thread() as url:
        response = httpx.post(_root(url) + "/api/chat", json={
            "model": "plan", "stream": False, "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 500 and set(response.json()) == {"error"}
    assert isinstance(response.json()["error"], str)


def test_transport_level_errors_are_ollama_shaped_too(serve_mock):
    limit, key = 10_000, {"authorization": "Bearer secret"}
    cases = [
        ("POST", "/api/chat", {"json": ok()}, 401),
        ("POST", "/api/chat", {"json": ok(padding="x" * limit), "headers": key}, 413),
        ("GET", "/api/chat", {"headers": key}, 405),
        ("POST", "/api/show", {"json": {}, "headers": key}, 400),
        ("GET", "/api/tags", {}, 401),
        ("POST", "/api/generate", {"json": {"model": "plan", "prompt": "hi"}, "headers": key}, 404),
    ]
    with serve_mock(max_body_bytes=limit, api_key="secret") as url, httpx.Client(base_url=_root(url)) as http:
        for method, path, kwargs, status in cases:
            response = http.request(method, path, **kwargs)
            assert response.status_code == status and set(response.json()) == {"error"}, (path, status)
        assert http.post("/api/chat", json=ok(), headers=key).status_code == 200


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


NESTED = {
    "arguments": '{"model":"plan","stream":false,"messages":[{"role":"user","content":"q"},'
                 '{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":%s}}]}]}',
    "schema": '{"model":"plan","messages":[{"role":"user","content":"q"}],'
              '"tools":[{"type":"function","function":{"name":"f","parameters":%s}}]}',
}


@pytest.mark.parametrize("where", NESTED)
def test_a_body_nested_near_the_parsers_limit_gets_a_reply_or_an_ollama_error(in_process, where):
    # Nesting the parser just accepts can overflow the stack later, where the request is read
    # or counted.
    for depth in range(900, 1000):
        response = in_process.post("/api/chat", content=NESTED[where] % _nested(depth))
        assert response.status_code in (200, 400), (depth, response.text[:200])
        if response.status_code == 400:
            assert isinstance(response.json()["error"], str)


MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]) | JSON_VALUE},
    optional={
        "content": TEXT | JSON_VALUE,
        "tool_name": st.just("list_files") | TEXT | JSON_VALUE,
        "tool_call_id": TEXT | JSON_VALUE,
        "tool_calls": st.lists(st.fixed_dictionaries(
            {"function": st.fixed_dictionaries({"name": st.just("list_files") | TEXT | JSON_VALUE},
                                               optional={"arguments": JSON_VALUE})},
            optional={"id": TEXT | JSON_VALUE}) | JSON_VALUE, max_size=2) | JSON_VALUE,
    },
)
WILD = st.fixed_dictionaries(
    {"model": st.sampled_from(["plan", "plan:latest"]) | TEXT,
     "messages": st.lists(MESSAGE, max_size=4) | JSON_VALUE},
    optional={
        "stream": st.booleans() | JSON_VALUE,
        "tools": st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.dictionaries(
            st.sampled_from(["name", "description", "parameters"]), JSON_VALUE)})) | JSON_VALUE,
        "options": st.fixed_dictionaries({}, optional={"num_predict": st.integers(-3, 40) | JSON_VALUE})
        | JSON_VALUE,
    },
)


@FUZZ
@given(body=WILD)
def test_generated_bodies_get_a_reply_or_an_ollama_error_never_a_500(in_process, body):
    response = post_generated(in_process, "/api/chat", body)
    if response.status_code == 200:
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert lines and lines[-1]["done"] is True and all(not line["done"] for line in lines[:-1])
    else:
        assert 400 <= response.status_code < 500
        assert isinstance(response.json()["error"], str) and response.json()["error"]
