"""POST /v1/responses: the official `openai` client drives the scripts through the Responses API."""

from __future__ import annotations

import itertools
import json
import logging
import re

import httpx
import openai
import pytest
from formats_support import FUZZ, JSON_VALUE, TEXT, post_generated, run_docs_snippet
from hypothesis import given
from hypothesis import strategies as st

import o200k
from mockprovider.scripts.scenarios import ANSWER_PLAN

QUESTION = "Which file mentions a timeout?"
INSTRUCTIONS = "You answer questions about log files."
TOOLS = [
    {"type": "function", "name": "list_files", "description": "List the files.",
     "parameters": {"type": "object", "properties": {}}, "strict": False},
    {"type": "function", "name": "read_file", "description": "Read one file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": False},
]
RESULTS = {"list_files": "errors.log\naccess.log\nnotes.txt", "read_file": "worker 7 timed out"}
EVENTS_TEXT = [
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
    "response.output_item.done", "response.completed",
]
EVENTS_CALL = [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.function_call_arguments.delta", "response.function_call_arguments.done",
    "response.output_item.done", "response.completed",
]


def _client(url: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, **{"api_key": "unused", "max_retries": 0, **kwargs})


def _chat_tools() -> list[dict]:
    """The same tools as a chat client sends them, written out independently of the mock."""
    return [
        {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                          "parameters": t["parameters"], "strict": t["strict"]}}
        for t in TOOLS
    ]


def _drive_plan(client: openai.OpenAI, *, stream: bool) -> tuple[list, list[dict]]:
    """Three turns of `plan`, each reply's output items and function_call_output items fed back.

    Returns the final `response` objects and, beside them, the chat-shaped conversation each
    request stood for (built here, not by the mock), for counting tokens independently.
    """
    items: list = [{"role": "user", "content": QUESTION}]
    chat: list[dict] = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": QUESTION}]
    responses, conversations = [], []
    for _ in range(3):
        kwargs = {"model": "plan", "instructions": INSTRUCTIONS, "input": items, "tools": TOOLS}
        if stream:
            with client.responses.stream(**kwargs) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(**kwargs)
        responses.append(response)
        conversations.append(list(chat))
        calls = [item for item in response.output if item.type == "function_call"]
        items += response.output
        items += [
            {"type": "function_call_output", "call_id": c.call_id, "output": RESULTS[c.name]} for c in calls
        ]
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]})
        chat += [{"role": "tool", "tool_call_id": c.call_id, "content": RESULTS[c.name]} for c in calls]
    return responses, conversations


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_official_client_drives_plan_to_the_scripted_answer(mock_url, stream):
    with _client(mock_url) as client:
        responses, _ = _drive_plan(client, stream=stream)
    calls = [(i.call_id, i.name, json.loads(i.arguments)) for r in responses[:2] for i in r.output]
    assert calls == [("c1", "list_files", {}), ("c2", "read_file", {"path": "errors.log"})]
    assert responses[-1].output_text == ANSWER_PLAN
    assert [r.status for r in responses] == ["completed"] * 3
    assert all(r.object == "response" and r.id.startswith("resp_") for r in responses)


def test_usage_is_the_chat_formula_and_input_tokens_grow_by_exactly_what_was_appended(mock_url):
    with _client(mock_url) as client:
        responses, conversations = _drive_plan(client, stream=False)
        chat_replies = [
            client.chat.completions.create(model="plan", messages=c, tools=_chat_tools())
            for c in conversations
        ]
    inputs = [r.usage.input_tokens for r in responses]
    assert inputs == [o200k.prompt_tokens(c, _chat_tools()) for c in conversations]
    for t in (1, 2):
        appended = conversations[t][len(conversations[t - 1]):]
        assert inputs[t] - inputs[t - 1] == sum(o200k.message_tokens(m) for m in appended)
    assert [r.usage.output_tokens for r in responses] == [c.usage.completion_tokens for c in chat_replies]
    assert all(r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens for r in responses)


def test_streaming_and_plain_replies_carry_the_same_output_and_usage(mock_url):
    with _client(mock_url) as client:
        streamed, _ = _drive_plan(client, stream=True)
        plain, _ = _drive_plan(client, stream=False)

    def essence(r) -> tuple:
        items = [(i.type, i.status, getattr(i, "call_id", ""), getattr(i, "arguments", "")) for i in r.output]
        return items, r.output_text, r.usage.model_dump(), r.status

    assert [essence(r) for r in streamed] == [essence(r) for r in plain]


def _raw_events(client: openai.OpenAI, **kwargs) -> list:
    kwargs.setdefault("tools", TOOLS)
    with client.responses.create(stream=True, **kwargs) as events:
        return list(events)


def test_stream_emits_the_documented_event_sequence_with_sequence_numbers(mock_url):
    with _client(mock_url) as client:
        call = _raw_events(client, model="plan", input=QUESTION)
        answer_input = [
            {"role": "user", "content": QUESTION},
            {"type": "function_call", "call_id": "c1", "name": "list_files", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "errors.log"},
            {"type": "function_call", "call_id": "c2", "name": "read_file", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "timed out"},
        ]
        text = _raw_events(client, model="plan", input=answer_input)
    for events, expected in ((call, EVENTS_CALL), (text, EVENTS_TEXT)):
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert [kind for kind, _ in itertools.groupby(e.type for e in events)] == expected
    deltas = "".join(e.delta for e in text if e.type == "response.output_text.delta")
    assert deltas == ANSWER_PLAN == text[-1].response.output_text
    assert "".join(e.delta for e in call if e.type == "response.function_call_arguments.delta") == "{}"
    assert call[-1].response.usage.output_tokens > 0 and text[0].response.usage is None


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_max_output_tokens_cuts_the_reply_as_incomplete(mock_url, stream):
    answer_input = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "Listing."},
        {"role": "assistant", "content": "Reading."},
    ]
    with _client(mock_url) as client:
        kwargs = {"model": "plan", "input": answer_input, "max_output_tokens": 16}
        response = _raw_events(client, **kwargs)[-1].response if stream else client.responses.create(**kwargs)
    enc = o200k.encoding()
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == enc.decode(enc.encode(ANSWER_PLAN)[:16])
    assert response.usage.output_tokens == 16
    assert response.output[0].status == "incomplete"


def test_official_client_retries_past_a_429_by_itself(mock_url, caplog):
    caplog.set_level(logging.INFO, logger="mockprovider")
    model = "plan+fault=429@0x1"
    with _client(mock_url) as client, pytest.raises(openai.RateLimitError):
        client.responses.create(model=model, input=QUESTION, tools=TOOLS)
    caplog.clear()
    with _client(mock_url, max_retries=2) as client:
        response = client.responses.create(model=model, input=QUESTION, tools=TOOLS)
    assert response.output[0].call_id == "c1"
    assert [r.getMessage() for r in caplog.records if "turn=0" in r.getMessage()] == [
        f"model={model} turn=0 attempt=0 status=429",
        f"model={model} turn=0 attempt=1 status=ok",
    ]


def test_options_in_the_base_url_prefix_apply(mock_url):
    prefixed = mock_url.replace("/v1", "/o/fault=500/v1")
    with _client(prefixed) as client, pytest.raises(openai.InternalServerError):
        client.responses.create(model="plan", input=QUESTION)


def test_api_key_is_required_when_configured(keyed_mock_url):
    with _client(keyed_mock_url, api_key="wrong") as client, pytest.raises(openai.AuthenticationError):
        client.responses.create(model="plan", input=QUESTION)
    with _client(keyed_mock_url, api_key="secret") as client:
        assert client.responses.create(model="plan", input=QUESTION).status == "completed"


USER = {"role": "user", "content": "hi"}
CALL = {"type": "function_call", "call_id": "c1", "name": "list_files", "arguments": "{}"}


def ok(**fields) -> dict:
    return {"model": "plan", "input": [USER], **fields}


BAD = {
    "malformed_json": (b'{"model": "plan",', 400, None),
    "body_is_array": ([ok()], 400, None),
    "missing_model": ({"input": "hi"}, 400, "model"),
    "unknown_model": (ok(model="plann"), 404, "model"),
    "missing_input": ({"model": "plan"}, 400, "input"),
    "empty_input": (ok(input=[]), 400, "input"),
    "reasoning_only": (ok(input=[{"type": "reasoning", "id": "rs_1", "summary": []}]), 400, "input"),
    "input_is_number": (ok(input=5), 400, "input"),
    "item_not_object": (ok(input=["hi"]), 400, "input[0]"),
    "bad_role": (ok(input=[{"role": "robot", "content": "hi"}]), 400, "input[0].role"),
    "unknown_item_type": (ok(input=[{"type": "web_search_call", "id": "ws_1"}]), 400, "input[0].type"),
    "image_part": (ok(input=[{"role": "user", "content": [{"type": "input_image"}]}]), 400,
                   "input[0].content[0]"),
    "output_answers_nothing": (ok(input=[USER, {"type": "function_call_output", "call_id": "zz",
                                                "output": "x"}]), 400, "input"),
    "call_without_name": (ok(input=[USER, {**CALL, "name": None}]), 400, "input[1].name"),
    "item_reference": (ok(input=[{"type": "item_reference", "id": "msg_1"}]), 400, "input[0].id"),
    "previous_response_id": (ok(previous_response_id="resp_1"), 400, "previous_response_id"),
    "conversation": (ok(conversation="conv_1"), 400, "conversation"),
    "store_true": (ok(store=True), 400, "store"),
    "background_true": (ok(background=True), 400, "background"),
    "store_not_bool": (ok(store="yes"), 400, "store"),
    "instructions_not_string": (ok(instructions=["x"]), 400, "instructions"),
    "builtin_tool": (ok(tools=[{"type": "web_search"}]), 400, "tools[0]"),
    "tool_without_name": (ok(tools=[{"type": "function", "parameters": {}}]), 400, "tools[0].name"),
    "max_output_tokens_zero": (ok(max_output_tokens=0), 400, "max_output_tokens"),
    "stream_not_bool": (ok(stream="yes"), 400, "stream"),
    "bad_options": (ok(model="plan+fault=nope"), 400, "model"),
}


@pytest.mark.parametrize(("body", "status", "param"), BAD.values(), ids=BAD.keys())
def test_bad_input_gets_an_openai_shaped_error_never_a_500(mock_url, body, status, param):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with httpx.Client(base_url=mock_url) as client:
        response = client.post("/responses", content=content, headers={"content-type": "application/json"})
        assert client.get("/models").status_code == 200, "the server keeps serving"
    error = response.json()["error"]
    assert (response.status_code, error["param"]) == (status, param)
    assert set(error) == {"message", "type", "param", "code"} and error["message"]


def test_stateless_refusal_says_to_send_the_whole_input(mock_url):
    with _client(mock_url) as client, pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="plan", input=QUESTION, previous_response_id="resp_1")
    assert "stateless" in caught.value.message and "whole conversation in 'input'" in caught.value.message


def test_readme_snippet_runs_as_written(capsys):
    run_docs_snippet("The Responses API")
    assert ANSWER_PLAN in capsys.readouterr().out


# --- hostile input: generated bodies, never a 500 ------------------------------------------------

CALL_ID = st.sampled_from(["c1", "c2"]) | TEXT
PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["input_text", "output_text", "refusal", "input_image"]) | JSON_VALUE},
    optional={"text": TEXT | JSON_VALUE, "refusal": TEXT | JSON_VALUE},
)
ITEM = (
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "developer"]) | JSON_VALUE},
        optional={"type": st.just("message") | JSON_VALUE, "content": TEXT | st.lists(PART, max_size=3)},
    )
    | st.fixed_dictionaries({"type": st.just("function_call"), "call_id": CALL_ID,
                             "name": st.just("list_files") | JSON_VALUE, "arguments": TEXT | JSON_VALUE})
    | st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": CALL_ID,
                             "output": TEXT | st.lists(PART, max_size=2) | JSON_VALUE})
    | JSON_VALUE
)
FUNCTION_TOOL = st.fixed_dictionaries(
    {"type": st.just("function"), "name": TEXT},
    optional={"parameters": st.just({"type": "object"}), "strict": st.booleans()},
)
PLAUSIBLE = st.fixed_dictionaries(
    {"model": st.sampled_from(["plan", "recover", "research", "destructive"]),
     "input": TEXT | st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                                     "content": TEXT}), min_size=1, max_size=4)},
    optional={"instructions": TEXT, "tools": st.lists(FUNCTION_TOOL, max_size=2),
              "max_output_tokens": st.integers(1, 40), "stream": st.booleans()},
)
WILD = st.fixed_dictionaries(
    {"model": st.sampled_from(["plan", "plan+latency=0"]) | TEXT,
     "input": TEXT | st.lists(ITEM, max_size=5) | JSON_VALUE},
    optional={
        "instructions": TEXT | JSON_VALUE,
        "tools": st.lists(FUNCTION_TOOL | JSON_VALUE, max_size=2) | JSON_VALUE,
        "max_output_tokens": st.integers(-2, 40) | JSON_VALUE,
        "stream": st.booleans() | JSON_VALUE,
        "store": st.booleans() | JSON_VALUE,
        "previous_response_id": st.none() | TEXT,
    },
)


@FUZZ
@given(body=PLAUSIBLE | WILD)
def test_generated_bodies_get_a_response_or_an_openai_error_never_a_500(in_process, body):
    response = post_generated(in_process, "/v1/responses", body)
    if response.status_code == 200 and body.get("stream") is True:
        assert re.search(r"event: response\.(completed|incomplete)\n", response.text)
    elif response.status_code == 200:
        assert response.json()["object"] == "response"
    else:
        assert 400 <= response.status_code < 500 and response.json()["error"]["message"]
