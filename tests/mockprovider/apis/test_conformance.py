"""The mock refuses what the real APIs refuse, with their wording: tool calls left unanswered,
tool results answering no call, and a call answered twice, in all three wire formats.

Each case is sent by the official client of its API; docs/conformance.md cites the real
API's message for each row.
"""

from __future__ import annotations

import anthropic
import openai
import pytest

QUESTION = {"role": "user", "content": "Which file mentions a timeout?"}
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("list_files", "read_file")
]


def _call(call_id: str, name: str = "list_files") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _asks(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [_call(i) for i in ids]}


def _answer(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "errors.log"}


@pytest.fixture(scope="module")
def chat(mock_url):
    with openai.OpenAI(base_url=mock_url, api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def messages_api(mock_url):
    with anthropic.Anthropic(base_url=mock_url.removesuffix("/v1"), api_key="x", max_retries=0) as client:
        yield client


# --- Chat Completions -------------------------------------------------------------------------

UNANSWERED = "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
ORPHAN = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with"

CHAT_REFUSED = {
    "a_call_left_unanswered_at_the_end": ([QUESTION, _asks("c1")], UNANSWERED, "messages.[1].role", "c1"),
    "one_of_two_calls_unanswered": (
        [QUESTION, _asks("c1", "c2"), _answer("c1")],
        UNANSWERED,
        "messages.[1].role",
        "c2",
    ),
    "a_user_message_before_the_answer": (
        [QUESTION, _asks("c1"), {"role": "user", "content": "go on"}, _answer("c1")],
        UNANSWERED,
        "messages.[1].role",
        "c1",
    ),
    "a_cancelled_run_resumed_with_a_new_question": (
        [QUESTION, _asks("c1"), QUESTION],
        UNANSWERED,
        "messages.[1].role",
        "c1",
    ),
    "a_result_answering_no_call": ([QUESTION, _answer("zz")], ORPHAN, "messages.[1].role", None),
    "a_result_after_the_turn_moved_on": (
        [
            QUESTION,
            _asks("c1"),
            _answer("c1"),
            {"role": "assistant", "content": "ok"},
            QUESTION,
            _answer("c9"),
        ],
        ORPHAN,
        "messages.[5].role",
        None,
    ),
    "a_call_answered_twice": (
        [QUESTION, _asks("c1"), _answer("c1"), _answer("c1")],
        ORPHAN,
        "messages.[3].role",
        "c1",
    ),
}


@pytest.mark.parametrize(("messages", "wording", "param", "names"), CHAT_REFUSED.values(), ids=CHAT_REFUSED)
def test_chat_refuses_what_openai_refuses_with_its_wording_and_param(chat, messages, wording, param, names):
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="plan", messages=messages)
    error = caught.value.body
    assert caught.value.status_code == 400
    assert error["message"].startswith(wording)
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    if names:
        assert names in error["message"]


def test_chat_serves_every_call_answered_in_any_order(chat):
    messages = [QUESTION, _asks("c1", "c2"), _answer("c2"), _answer("c1")]
    reply = chat.chat.completions.create(model="plan", messages=messages, tools=TOOLS)
    assert reply.choices[0].finish_reason == "tool_calls"  # plan's turn 1: read_file


def test_a_streamed_request_is_refused_before_any_chunk(chat):
    with pytest.raises(openai.BadRequestError, match="did not have response messages: c1"):
        chat.chat.completions.create(model="plan", messages=[QUESTION, _asks("c1")], stream=True)


# --- Responses --------------------------------------------------------------------------------

FUNCTION_CALL = {"type": "function_call", "call_id": "c1", "name": "list_files", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "errors.log"}
USER_ITEM = {"role": "user", "content": "Which file mentions a timeout?"}

RESPONSES_REFUSED = {
    "a_call_left_unanswered": ([USER_ITEM, FUNCTION_CALL], "No tool output found for function call c1."),
    "an_output_answering_no_call": (
        [USER_ITEM, OUTPUT],
        "No tool call found for function call output with call_id c1.",
    ),
    "an_output_before_its_call": (
        [USER_ITEM, OUTPUT, FUNCTION_CALL],
        "No tool call found for function call output with call_id c1.",
    ),
    "a_call_answered_twice": ([USER_ITEM, FUNCTION_CALL, OUTPUT, OUTPUT], "Duplicate function call output"),
}


@pytest.mark.parametrize(("items", "wording"), RESPONSES_REFUSED.values(), ids=RESPONSES_REFUSED)
def test_responses_refuses_what_openai_refuses_with_its_wording(chat, items, wording):
    with pytest.raises(openai.BadRequestError) as caught:
        chat.responses.create(model="plan", input=items)
    assert caught.value.status_code == 400
    assert caught.value.body["message"].startswith(wording)
    assert caught.value.body["param"] == "input"


def test_responses_serves_a_call_with_its_output(chat):
    tools = [
        {"type": "function", "name": t["function"]["name"], "parameters": {"type": "object"}} for t in TOOLS
    ]
    response = chat.responses.create(model="plan", input=[USER_ITEM, FUNCTION_CALL, OUTPUT], tools=tools)
    assert response.output[0].type == "function_call"  # plan's turn 1: read_file
    assert response.output[0].name == "read_file"


# --- Anthropic Messages -----------------------------------------------------------------------

USE = {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "errors.log"}
ASKED = {"role": "assistant", "content": [USE]}
NOT_FOUND = "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."
UNEXPECTED = "unexpected `tool_use_id` found in `tool_result` blocks: toolu_1."

MESSAGES_REFUSED = {
    "a_call_left_unanswered_at_the_end": ([QUESTION, ASKED], f"messages.1: {NOT_FOUND}"),
    "a_text_reply_instead_of_the_result": (
        [QUESTION, ASKED, {"role": "user", "content": "go on"}],
        f"messages.1: {NOT_FOUND}",
    ),
    "text_before_the_result": (
        [QUESTION, ASKED, {"role": "user", "content": [{"type": "text", "text": "here:"}, RESULT]}],
        f"messages.1: {NOT_FOUND}",
    ),
    "text_between_two_results": (
        [
            QUESTION,
            {"role": "assistant", "content": [USE, {**USE, "id": "toolu_2"}]},
            {"role": "user", "content": [RESULT, {"type": "text", "text": "and:"},
                                         {**RESULT, "tool_use_id": "toolu_2"}]},
        ],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_2.",
    ),
    "a_result_answering_no_call": (
        [{"role": "user", "content": [RESULT]}],
        f"messages.0.content.0: {UNEXPECTED}",
    ),
    "a_result_two_messages_late": (
        [
            QUESTION,
            ASKED,
            {"role": "user", "content": [RESULT]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [RESULT]},
        ],
        f"messages.4.content.0: {UNEXPECTED}",
    ),
    "a_call_answered_twice": (
        [QUESTION, ASKED, {"role": "user", "content": [RESULT, RESULT]}],
        "messages.2.content.1: each tool_use must have a single result.",
    ),
}


@pytest.mark.parametrize(("messages", "wording"), MESSAGES_REFUSED.values(), ids=MESSAGES_REFUSED)
def test_messages_refuses_what_anthropic_refuses_with_its_wording(messages_api, messages, wording):
    with pytest.raises(anthropic.BadRequestError) as caught:
        messages_api.messages.create(model="plan", max_tokens=100, messages=messages)
    assert caught.value.status_code == 400
    error = caught.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(wording)


def test_messages_serves_text_after_the_results(messages_api):
    after = {"role": "user", "content": [RESULT, {"type": "text", "text": "and keep it short"}]}
    reply = messages_api.messages.create(model="plan", max_tokens=100, messages=[QUESTION, ASKED, after])
    assert reply.stop_reason in ("tool_use", "end_turn")


def test_messages_serves_a_call_answered_in_the_next_message(messages_api):
    reply = messages_api.messages.create(
        model="plan",
        max_tokens=100,
        messages=[QUESTION, ASKED, {"role": "user", "content": [RESULT]}],
        tools=[{"name": t["function"]["name"], "input_schema": {"type": "object"}} for t in TOOLS],
    )
    assert reply.stop_reason == "tool_use"
    assert reply.content[0].name == "read_file"
