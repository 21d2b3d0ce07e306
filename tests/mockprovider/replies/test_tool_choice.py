"""A scripted reply is one a real model could give under the request's tools and tool_choice:
no tool call when none may be made, a `script_mismatch` error where the script cannot obey.

Driven by the official clients of all three APIs against a real server.
"""

from __future__ import annotations

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mockprovider.replies.tool_choice import FALLBACK_TEXT
from mockprovider.scripts.scenarios import ANSWER_PLAN, SCENARIOS
from mockprovider.server import serve_in_thread

QUESTION = {"role": "user", "content": "Which file mentions a timeout?"}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("list_files", "read_file")
]
RESPONSES_TOOLS = [
    {"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}
    for t in CHAT_TOOLS
]
MESSAGES_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in CHAT_TOOLS
]
ANSWERED_TWICE = [  # plan's turn 2, where it answers in text
    QUESTION,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "errors.log"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "worker 7 timed out"},
]
FALLBACK_SCENARIO = {
    "name": "react",
    "fallback": "Thought: I can answer now.\nAnswer: errors.log",
    "turns": [{"tool_calls": [{"name": "list_files"}]}],
    "after_last": "repeat",
}
UNDECLARED = {"name": "hallucinates", "turns": [{"tool_calls": [{"name": "rm_rf"}]}], "after_last": "repeat"}


@pytest.fixture(scope="module")
def url():
    with serve_in_thread(scenario_files=[FALLBACK_SCENARIO, UNDECLARED]) as base:
        yield base


@pytest.fixture(scope="module")
def chat(url):
    with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def messages_api(url):
    with anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="x", max_retries=0) as client:
        yield client


# --- no tool may be called: text, never a tool call -------------------------------------------


@pytest.mark.parametrize(
    "extra", [{}, {"tools": CHAT_TOOLS, "tool_choice": "none"}], ids=["no_tools", "none"]
)
def test_chat_answers_a_tool_call_turn_with_text_when_no_tool_may_be_called(chat, extra):
    reply = chat.chat.completions.create(model="plan", messages=[QUESTION], **extra)
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content == FALLBACK_TEXT
    assert reply.choices[0].finish_reason == "stop"


def test_a_streamed_reply_without_tools_streams_the_text(chat):
    chunks = list(chat.chat.completions.create(model="plan", messages=[QUESTION], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == FALLBACK_TEXT
    assert not any(c.choices[0].delta.tool_calls for c in chunks if c.choices)


def test_the_cap_exit_final_answer_request_without_tools_gets_text(chat):
    """What CrewAI, Semantic Kernel and smolagents send when their step cap is reached."""
    messages = [*ANSWERED_TWICE[:3], {"role": "user", "content": "Give your final answer now."}]
    reply = chat.chat.completions.create(model="plan", messages=messages)
    assert reply.choices[0].message.content == FALLBACK_TEXT


def test_a_scenario_files_fallback_is_the_text_instead_of_its_call(chat):
    reply = chat.chat.completions.create(model="react", messages=[QUESTION])
    assert reply.choices[0].message.content == FALLBACK_SCENARIO["fallback"]


def test_a_text_turn_is_unchanged_without_tools(chat):
    reply = chat.chat.completions.create(model="plan", messages=ANSWERED_TWICE)
    assert reply.choices[0].message.content == ANSWER_PLAN


def test_responses_answers_with_a_message_item_and_echoes_tool_choice(chat):
    response = chat.responses.create(
        model="plan", input="Which file?", tools=RESPONSES_TOOLS, tool_choice="none"
    )
    assert [item.type for item in response.output] == ["message"]
    assert response.output_text == FALLBACK_TEXT
    assert response.tool_choice == "none"
    plain = chat.responses.create(model="plan", input="Which file?")
    assert plain.output_text == FALLBACK_TEXT and plain.tool_choice == "auto"


@pytest.mark.parametrize(
    "extra", [{}, {"tools": MESSAGES_TOOLS, "tool_choice": {"type": "none"}}], ids=["no_tools", "none"]
)
def test_messages_answers_with_a_text_block(messages_api, extra):
    reply = messages_api.messages.create(model="plan", max_tokens=200, messages=[QUESTION], **extra)
    assert [block.type for block in reply.content] == ["text"]
    assert reply.content[0].text == FALLBACK_TEXT
    assert reply.stop_reason == "end_turn"


# --- a tool must be called: a text turn is the script's mistake ----------------------------------


def _mismatch(caught: pytest.ExceptionInfo, *words: str) -> None:
    assert caught.value.status_code == 400
    message = str(caught.value)
    assert "script_mismatch" in message
    for word in words:
        assert word in message


def test_chat_required_and_a_text_turn_is_a_script_mismatch_naming_the_turn(chat):
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(
            model="plan", messages=ANSWERED_TWICE, tools=CHAT_TOOLS, tool_choice="required"
        )
    _mismatch(caught, "turn 2", "requires a tool call", "'plan'")
    assert caught.value.body["code"] == "script_mismatch"


def test_chat_required_and_a_call_turn_is_served(chat):
    reply = chat.chat.completions.create(
        model="plan", messages=[QUESTION], tools=CHAT_TOOLS, tool_choice="required"
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "list_files"


def test_chat_a_named_function_the_script_does_not_call_is_a_script_mismatch(chat):
    choice = {"type": "function", "function": {"name": "read_file"}}
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="plan", messages=[QUESTION], tools=CHAT_TOOLS, tool_choice=choice)
    _mismatch(caught, "turn 0", "'list_files'", "'read_file'")


def test_chat_the_named_function_the_script_calls_is_served(chat):
    choice = {"type": "function", "function": {"name": "list_files"}}
    reply = chat.chat.completions.create(
        model="plan", messages=[QUESTION], tools=CHAT_TOOLS, tool_choice=choice
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "list_files"


def test_responses_required_and_a_text_turn_is_a_script_mismatch(chat):
    items = [
        {"role": "user", "content": "Which file?"},
        {"type": "function_call", "call_id": "c1", "name": "list_files", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "errors.log"},
        {"type": "function_call", "call_id": "c2", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "worker 7 timed out"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        chat.responses.create(model="plan", input=items, tools=RESPONSES_TOOLS, tool_choice="required")
    _mismatch(caught, "turn 2")


def test_messages_any_and_a_named_tool_are_held_like_required_and_named(messages_api):
    asked = [QUESTION]
    reply = messages_api.messages.create(
        model="plan", max_tokens=200, messages=asked, tools=MESSAGES_TOOLS, tool_choice={"type": "any"}
    )
    assert reply.content[0].type == "tool_use"
    with pytest.raises(anthropic.BadRequestError) as caught:
        messages_api.messages.create(
            model="plan",
            max_tokens=200,
            messages=asked,
            tools=MESSAGES_TOOLS,
            tool_choice={"type": "tool", "name": "read_file"},
        )
    _mismatch(caught, "turn 0", "'read_file'")


# --- what the real APIs refuse outright --------------------------------------------------------


def test_chat_a_named_function_not_declared_is_the_apis_400(chat):
    choice = {"type": "function", "function": {"name": "delete_file"}}
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="plan", messages=[QUESTION], tools=CHAT_TOOLS, tool_choice=choice)
    assert caught.value.body["param"] == "tool_choice"
    assert "'delete_file'" in caught.value.body["message"]
    assert caught.value.body["code"] != "script_mismatch"


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "list_files"}}])
def test_chat_a_tool_choice_without_tools_is_the_apis_400(chat, choice):
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="plan", messages=[QUESTION], tool_choice=choice)
    assert caught.value.body["message"] == (
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
    )


@pytest.mark.parametrize(
    "choice", ["sometimes", {"type": "function"}, 7, {"type": "function", "function": "x"}]
)
def test_chat_a_malformed_tool_choice_is_a_400_naming_it(chat, choice):
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(model="plan", messages=[QUESTION], tools=CHAT_TOOLS, tool_choice=choice)
    assert caught.value.body["param"] == "tool_choice"


def test_responses_and_messages_refuse_a_named_function_not_declared(chat, messages_api):
    with pytest.raises(openai.BadRequestError, match="'delete_file'"):
        chat.responses.create(
            model="plan",
            input="Which file?",
            tools=RESPONSES_TOOLS,
            tool_choice={"type": "function", "name": "delete_file"},
        )
    with pytest.raises(anthropic.BadRequestError, match="'delete_file'"):
        messages_api.messages.create(
            model="plan",
            max_tokens=100,
            messages=[QUESTION],
            tools=MESSAGES_TOOLS,
            tool_choice={"type": "tool", "name": "delete_file"},
        )


# --- scripted calls of tools the request does not declare ---------------------------------------


def test_an_undeclared_tool_is_called_as_scripted_by_default(chat):
    reply = chat.chat.completions.create(model="hallucinates", messages=[QUESTION], tools=CHAT_TOOLS)
    assert reply.choices[0].message.tool_calls[0].function.name == "rm_rf"


def test_the_undeclared_tools_refuse_option_makes_it_a_script_mismatch(chat, url):
    with pytest.raises(openai.BadRequestError) as caught:
        chat.chat.completions.create(
            model="hallucinates+undeclared_tools=refuse", messages=[QUESTION], tools=CHAT_TOOLS
        )
    _mismatch(caught, "'rm_rf'", "undeclared_tools=refuse")
    with (
        openai.OpenAI(
            base_url=url.replace("/v1", "/o/undeclared_tools=refuse/v1"), api_key="x", max_retries=0
        ) as strict,
        pytest.raises(openai.BadRequestError, match="'rm_rf'"),
    ):
        strict.chat.completions.create(model="hallucinates", messages=[QUESTION], tools=CHAT_TOOLS)


def test_a_bad_undeclared_tools_value_is_refused_naming_the_choices(chat):
    with pytest.raises(openai.BadRequestError, match="allow or refuse"):
        chat.chat.completions.create(
            model="plan+undeclared_tools=maybe", messages=[QUESTION], tools=CHAT_TOOLS
        )


def test_a_fallback_that_is_not_text_is_refused_at_start_up_naming_its_path():
    from mockprovider.scripts.files import ScenarioFileError, load_scenarios

    with pytest.raises(ScenarioFileError, match=r"\$\.fallback"):
        load_scenarios([{**FALLBACK_SCENARIO, "fallback": 7}])


# --- Gemini's function calling config, through google-genai ---------------------------------------


def _gemini(url: str):
    genai = pytest.importorskip("google.genai")
    return genai.Client(api_key="x", http_options={"base_url": url.removesuffix("/v1")})


def _gemini_config(mode: str, names: list[str] | None = None):
    from google.genai import types

    declarations = [types.FunctionDeclaration(name=t["function"]["name"]) for t in CHAT_TOOLS]
    calling = types.FunctionCallingConfig(mode=mode, allowed_function_names=names)
    return types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)],
        tool_config=types.ToolConfig(function_calling_config=calling),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )


def test_gemini_mode_none_answers_text_and_any_with_one_name_is_that_function(url):
    from google.genai import errors

    with _gemini(url) as client:
        none = client.models.generate_content(
            model="plan", contents="Which file?", config=_gemini_config("NONE")
        )
        assert none.text == FALLBACK_TEXT and not none.function_calls
        named = client.models.generate_content(
            model="plan", contents="Which file?", config=_gemini_config("ANY", ["list_files"])
        )
        assert named.function_calls[0].name == "list_files"
        with pytest.raises(errors.ClientError) as caught:
            client.models.generate_content(
                model="plan", contents="Which file?", config=_gemini_config("ANY", ["read_file"])
            )
    assert caught.value.code == 400 and "script_mismatch" in str(caught.value)


def test_gemini_mode_any_with_several_names_calls_only_one_of_them(url):
    # A real model under mode ANY calls only a function allowedFunctionNames lists.
    from google.genai import errors, types

    def config(names: list[str]) -> types.GenerateContentConfig:
        declarations = [types.FunctionDeclaration(name=n) for n in ("list_files", "read_file", "grep")]
        calling = types.FunctionCallingConfig(mode="ANY", allowed_function_names=names)
        return types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=declarations)],
            tool_config=types.ToolConfig(function_calling_config=calling),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    with _gemini(url) as client:
        allowed = client.models.generate_content(
            model="plan", contents="Which file?", config=config(["grep", "list_files"]))
        assert allowed.function_calls[0].name == "list_files"
        with pytest.raises(errors.ClientError) as caught:
            client.models.generate_content(
                model="plan", contents="Which file?", config=config(["read_file", "grep"]))
    assert caught.value.code == 400 and "script_mismatch" in str(caught.value)
    assert "'list_files'" in str(caught.value)


@pytest.mark.parametrize("names", [["read_file"], ["read_file", "grep"]])
def test_gemini_mode_validated_calls_only_an_allowed_function(url, names):
    # VALIDATED may answer with text or a call, the call limited to allowedFunctionNames.
    from google.genai import errors, types

    declarations = [types.FunctionDeclaration(name=n) for n in ("list_files", "read_file", "grep")]
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=declarations)],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(
            mode="VALIDATED", allowed_function_names=names)),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    with _gemini(url) as client, pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="plan", contents="Which file?", config=config)
    assert caught.value.code == 400 and "script_mismatch" in str(caught.value)


# --- the rule as a property: whatever the scenario and turn, no tools offered means no call ----------


@given(
    scenario=st.sampled_from(sorted(SCENARIOS)),
    turns=st.integers(min_value=0, max_value=6),
    result=st.sampled_from(["errors.log", "Call list_files to see what exists.", "declined by the user", ""]),
    choice=st.sampled_from([None, "none"]),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_scenario_calls_a_tool_when_none_may_be_called(in_process, scenario, turns, result, choice):
    messages: list[dict] = [QUESTION]
    for t in range(turns):  # earlier turns as an agent with tools would have sent them
        call = {"id": f"k{t}", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"k{t}", "content": result},
        ]
    body = {"model": scenario, "messages": messages}
    if choice:
        body |= {"tools": CHAT_TOOLS, "tool_choice": choice}
    reply = in_process.post("/v1/chat/completions", json=body)
    assert reply.status_code == 200, reply.text
    message = reply.json()["choices"][0]["message"]
    assert not message.get("tool_calls") and isinstance(message["content"], str)
    assert reply.json()["choices"][0]["finish_reason"] == "stop"
