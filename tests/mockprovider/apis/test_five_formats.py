"""One script, every wire format (Gemini on Vertex AI and Bedrock's Converse too): `plan` gives the
same turns through every official client.

Each driver runs `plan` to its answer with one format's client, plain or streamed, feeding the
same tool results back, and reduces every reply to the same `Turn`. The turns must agree in
every format: the calls and their arguments, the answer, the finish, the reply's tokens, and the
prompt's tokens (the chat formula over the conversation the format carries: Ollama's client
drops the call ids, so its calls are named by position and its prompts count those names).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import boto3
import ollama
import openai
import pytest
from botocore.config import Config
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

import o200k
from mockprovider.scripts.scenarios import ANSWER_PLAN

QUESTION = "Which file mentions a timeout?"
SYSTEM = "You answer questions about log files."
SCHEMAS = {
    "list_files": ("List the files.", {"type": "object", "properties": {}}),
    "read_file": ("Read one file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
}
RESULTS = {"list_files": "errors.log\naccess.log\nnotes.txt", "read_file": "worker 7 timed out"}
CHAT_TOOLS = [{"type": "function", "function": {"name": name, "description": d, "parameters": s}}
              for name, (d, s) in SCHEMAS.items()]


@dataclass(frozen=True)
class Turn:
    calls: tuple[tuple[str, str], ...]
    """(name, arguments as compact JSON) of each call."""
    text: str | None
    finish: str
    """`tool_calls` or `stop`, whatever the format calls it."""
    prompt_tokens: int
    completion_tokens: int


def _json(args: Any) -> str:
    return json.dumps(args, separators=(",", ":"))


def _chat(url: str, stream: bool) -> list[Turn]:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    messages: list = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    turns = []
    for _ in range(3):
        kwargs = {"model": "plan", "messages": messages, "tools": CHAT_TOOLS}
        if stream:
            with client.chat.completions.stream(**kwargs, stream_options={"include_usage": True}) as events:
                reply = events.get_final_completion()
        else:
            reply = client.chat.completions.create(**kwargs)
        choice, calls = reply.choices[0], reply.choices[0].message.tool_calls or []
        turns.append(Turn(tuple((c.function.name, c.function.arguments) for c in calls),
                          choice.message.content, choice.finish_reason,
                          reply.usage.prompt_tokens, reply.usage.completion_tokens))
        messages.append({"role": "assistant", "content": None,
                         "tool_calls": [c.model_dump(exclude_none=True) for c in calls]} if calls
                        else {"role": "assistant", "content": choice.message.content})
        messages += [{"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.function.name]}
                     for c in calls]
    client.close()
    return turns


def _responses(url: str, stream: bool) -> list[Turn]:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    tools = [{"type": "function", "name": name, "description": d, "parameters": s}
             for name, (d, s) in SCHEMAS.items()]
    items: list = [{"role": "user", "content": QUESTION}]
    turns = []
    for _ in range(3):
        kwargs = {"model": "plan", "instructions": SYSTEM, "input": items, "tools": tools}
        if stream:
            with client.responses.stream(**kwargs) as events:
                reply = events.get_final_response()
        else:
            reply = client.responses.create(**kwargs)
        calls = [item for item in reply.output if item.type == "function_call"]
        turns.append(Turn(tuple((c.name, c.arguments) for c in calls), None if calls else reply.output_text,
                          "tool_calls" if calls else "stop",
                          reply.usage.input_tokens, reply.usage.output_tokens))
        items += reply.output
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": RESULTS[c.name]}
                  for c in calls]
    client.close()
    return turns


def _anthropic(url: str, stream: bool) -> list[Turn]:
    client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=0)
    tools = [{"name": name, "description": d, "input_schema": s} for name, (d, s) in SCHEMAS.items()]
    messages: list = [{"role": "user", "content": QUESTION}]
    turns = []
    for _ in range(3):
        kwargs = {"model": "plan", "system": SYSTEM, "max_tokens": 1024, "messages": messages, "tools": tools}
        if stream:
            with client.messages.stream(**kwargs) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        uses = [b for b in reply.content if b.type == "tool_use"]
        text = None if uses else reply.content[0].text
        finish = {"tool_use": "tool_calls", "end_turn": "stop"}[reply.stop_reason]
        turns.append(Turn(tuple((b.name, _json(b.input)) for b in uses), text, finish,
                          reply.usage.input_tokens, reply.usage.output_tokens))
        messages.append({"role": "assistant", "content": reply.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": RESULTS[b.name]}
            for b in uses] or "go on"})
    client.close()
    return turns


def _gemini_reply(client: genai.Client, contents: list, config: types.GenerateContentConfig,
                  stream: bool) -> tuple[list[types.Part], types.GenerateContentResponse]:
    if not stream:
        reply = client.models.generate_content(model="plan", contents=contents, config=config)
        return reply.candidates[0].content.parts, reply
    chunks = list(client.models.generate_content_stream(model="plan", contents=contents, config=config))
    parts = [p for c in chunks for p in c.candidates[0].content.parts]
    if parts[0].text is not None:
        parts = [types.Part(text="".join(p.text for p in parts))]
    return parts, chunks[-1]


def _gemini(url: str, stream: bool, *, vertex: bool = False) -> list[Turn]:
    declarations = [types.FunctionDeclaration(name=name, description=d, parameters_json_schema=s)
                    for name, (d, s) in SCHEMAS.items()]
    config = types.GenerateContentConfig(
        system_instruction=SYSTEM, tools=[types.Tool(function_declarations=declarations)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    contents: list = [types.Content(role="user", parts=[types.Part(text=QUESTION)])]
    turns = []
    options = types.HttpOptions(base_url=url.removesuffix("/v1"))
    if vertex:  # Vertex AI's paths, with OAuth credentials that need no network
        client = genai.Client(vertexai=True, project="p", location="us-central1",
                              credentials=Credentials(token="unused"), http_options=options)
    else:
        client = genai.Client(api_key="unused", http_options=options)
    with client:
        for _ in range(3):
            parts, last = _gemini_reply(client, contents, config, stream)
            calls = [p.function_call for p in parts if p.function_call]
            usage = last.usage_metadata
            turns.append(Turn(tuple((c.name, _json(c.args)) for c in calls), None if calls else parts[0].text,
                              "tool_calls" if calls else "stop", usage.prompt_token_count,
                              usage.candidates_token_count))
            contents.append(types.Content(role="model", parts=parts))
            contents.append(types.Content(role="user", parts=[
                types.Part(function_response=types.FunctionResponse(id=c.id, name=c.name,
                                                                    response={"result": RESULTS[c.name]}))
                for c in calls] or [types.Part(text="go on")]))
    return turns


def _ollama(url: str, stream: bool) -> list[Turn]:
    messages: list = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    turns = []
    with ollama.Client(host=url.removesuffix("/v1")) as client:
        for _ in range(3):
            if stream:
                parts = list(client.chat(model="plan", messages=messages, tools=CHAT_TOOLS, stream=True))
                text = "".join(p.message.content or "" for p in parts)
                calls = [c for p in parts for c in p.message.tool_calls or []]
                last = parts[-1]
            else:
                last = client.chat(model="plan", messages=messages, tools=CHAT_TOOLS)
                text, calls = last.message.content, list(last.message.tool_calls or [])
            turns.append(Turn(tuple((c.function.name, _json(c.function.arguments)) for c in calls),
                              None if calls else text, "tool_calls" if calls else last.done_reason,
                              last.prompt_eval_count, last.eval_count))
            messages.append({"role": "assistant", "content": text, "tool_calls": calls})
            messages += [{"role": "tool", "tool_name": c.function.name, "content": RESULTS[c.function.name]}
                         for c in calls]
    return turns


def _bedrock(url: str, stream: bool) -> list[Turn]:
    client = boto3.client("bedrock-runtime", endpoint_url=url.removesuffix("/v1"), region_name="us-east-1",
                          aws_access_key_id="unused", aws_secret_access_key="unused",
                          config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
    tools = {"tools": [{"toolSpec": {"name": name, "description": d, "inputSchema": {"json": s}}}
                       for name, (d, s) in SCHEMAS.items()]}
    messages: list = [{"role": "user", "content": [{"text": QUESTION}]}]
    turns = []
    for _ in range(3):
        kwargs = {"modelId": "plan", "system": [{"text": SYSTEM}], "messages": messages, "toolConfig": tools}
        if stream:
            events = list(client.converse_stream(**kwargs)["stream"])
            deltas = [e["contentBlockDelta"]["delta"] for e in events if "contentBlockDelta" in e]
            starts = [e["contentBlockStart"]["start"]["toolUse"] for e in events if "contentBlockStart" in e]
            text = "".join(d.get("text", "") for d in deltas)
            arguments = "".join(d["toolUse"]["input"] for d in deltas if "toolUse" in d)
            uses = [{**start, "input": json.loads(arguments)} for start in starts]  # plan calls one at a time
            stop, usage = events[-2]["messageStop"]["stopReason"], events[-1]["metadata"]["usage"]
            content = [{"toolUse": u} for u in uses] or [{"text": text}]
        else:
            reply = client.converse(**kwargs)
            content, stop, usage = reply["output"]["message"]["content"], reply["stopReason"], reply["usage"]
            uses = [b["toolUse"] for b in content if "toolUse" in b]
        text = None if uses else content[0]["text"]
        finish = {"tool_use": "tool_calls", "end_turn": "stop"}[stop]
        turns.append(Turn(tuple((u["name"], _json(u["input"])) for u in uses), text, finish,
                          usage["inputTokens"], usage["outputTokens"]))
        messages.append({"role": "assistant", "content": content})
        messages.append({"role": "user", "content": [
            {"toolResult": {"toolUseId": u["toolUseId"], "content": [{"text": RESULTS[u["name"]]}]}}
            for u in uses] or [{"text": "go on"}]})
    client.close()
    return turns


DRIVERS: dict[str, Callable[[str, bool], list[Turn]]] = {
    "chat": _chat, "responses": _responses, "anthropic": _anthropic, "gemini": _gemini, "ollama": _ollama,
    "bedrock": _bedrock,
    "vertex": lambda url, stream: _gemini(url, stream, vertex=True),
}


def _conversations(call_id: Callable[[int, int, str], str]) -> list[list[dict]]:
    """The chat conversation before each of `plan`'s three turns, calls named by `call_id`."""
    script = [[("list_files", "{}")], [("read_file", '{"path":"errors.log"}')], []]
    chat: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    out = []
    for turn, calls in enumerate(script):
        out.append(list(chat))
        ids = [call_id(turn, j, name) for j, (name, _) in enumerate(calls)]
        chat.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in zip(ids, calls, strict=True)]})
        chat += [{"role": "tool", "tool_call_id": i, "content": RESULTS[n]}
                 for i, (n, _) in zip(ids, calls, strict=True)]
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_plan_gives_the_same_turns_in_every_format(mock_url, stream):
    runs = {name: drive(mock_url, stream) for name, drive in DRIVERS.items()}
    scripted = [(("list_files", "{}"),), (("read_file", '{"path":"errors.log"}'),), ()]
    scripted_ids = _conversations(lambda turn, j, name: f"c{turn + 1}")
    positional = _conversations(lambda turn, j, name: f"call_{turn}_{j}")
    for name, turns in runs.items():
        assert [t.calls for t in turns] == scripted, name
        assert [t.text for t in turns] == [None, None, ANSWER_PLAN], name
        assert [t.finish for t in turns] == ["tool_calls", "tool_calls", "stop"], name
        conversations = positional if name == "ollama" else scripted_ids
        billed = [o200k.prompt_tokens(c, CHAT_TOOLS) for c in conversations]
        assert [t.prompt_tokens for t in turns] == billed, name
    completions = {name: [t.completion_tokens for t in turns] for name, turns in runs.items()}
    assert len(set(map(tuple, completions.values()))) == 1, completions
    assert completions["chat"][2] == o200k.count(ANSWER_PLAN)


DOCS = Path(__file__).parents[3] / "docs" / "formats.md"
EXAMPLES = dict(re.findall(r"^## (.+?)\n.*?```python\n(.*?)```", DOCS.read_text(), re.S | re.M))


ANSWERING = [heading for heading in EXAMPLES if heading != "Embeddings"]
"""The examples that run `plan` to its answer."""


def test_the_docs_show_one_example_per_format():
    assert list(EXAMPLES) == ["Chat Completions", "Responses", "Anthropic Messages", "Gemini", "Ollama",
                              "Azure OpenAI", "Vertex AI", "Amazon Bedrock (Converse)", "Embeddings"]


@pytest.mark.parametrize("heading", ANSWERING)
def test_each_docs_example_reaches_the_answer_as_written(mock_url, capsys, heading):
    namespace: dict[str, Any] = {}
    exec(EXAMPLES[heading].replace("http://127.0.0.1:8000", mock_url.removesuffix("/v1")), namespace)
    namespace["client"].close()  # the examples leave it open, as a script may
    assert capsys.readouterr().out == ANSWER_PLAN + "\n"


def test_the_embeddings_examples_print_what_they_say(mock_url, capsys):
    section = DOCS.read_text().partition("## Embeddings\n")[2].partition("\n## ")[0]
    texts = ["worker 7 timed out after 30000 ms", "worker 7 timed out", "Remember to rotate your logs."]
    namespace: dict[str, Any] = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        exec(block.replace("http://127.0.0.1:8000", mock_url.removesuffix("/v1")), namespace)
    for name in ("client", "google", "local"):
        namespace[name].close()
    assert capsys.readouterr().out == f"1536 {sum(map(o200k.count, texts))}\nTrue\n768\n768\n"
