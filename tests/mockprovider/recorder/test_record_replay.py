"""Record a session through the proxy against an upstream, then replay it: the same replies, turn by turn."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import BadRequestError, OpenAI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import o200k
from mockprovider.recorder import Stream, create_recorder
from mockprovider.recorder import proxy as proxy_module
from mockprovider.server import serve_in_thread

Reply = tuple[str | None, list[tuple[str, str, str]]]
TOOLS = [{"type": "function", "function": {"name": n}} for n in ("list_files", "read_file", "delete_file")]


def _answer(client: OpenAI, model: str, messages: list[dict[str, Any]], *, stream: bool) -> Reply:
    """(content, [(id, name, arguments)]) of one turn, read through the official client."""
    if not stream:
        completion = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        message = completion.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
        return message.content, calls
    text, parts = "", {}
    for chunk in client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for part in choice.delta.tool_calls or []:
                slot = parts.setdefault(part.index, ["", "", ""])
                slot[0] += part.id or ""
                slot[1] += part.function.name or ""
                slot[2] += part.function.arguments or ""
    calls = [tuple(slot) for _, slot in sorted(parts.items())]
    return (None if calls else text), calls  # type: ignore[return-value]


def _session(
    client: OpenAI, model: str, task: str, results: list[str], *, stream: bool = False
) -> list[Reply]:
    """Drive a conversation to its answer; tool results are taken from `results`, in order."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    replies: list[Reply] = []
    for _ in range(6):
        content, calls = _answer(client, model, messages, stream=stream)
        replies.append((content, calls))
        if not calls:
            return replies
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": i, "content": results.pop(0)} for i, _, _ in calls]
    raise AssertionError("the session did not end")


@pytest.fixture
def upstream():
    """A second mock on its own loopback port: the 'real' server being recorded."""
    with serve_in_thread() as url:
        yield url


def test_a_recorded_session_replays_the_same_replies_turn_by_turn(upstream: str, tmp_path: Path):
    out = tmp_path / "session.json"
    with serve_in_thread(create_recorder(upstream=upstream, out=out)) as proxy:
        recorded = _session(
            OpenAI(base_url=proxy, api_key="k", max_retries=0),
            "plan",
            "Which file?",
            ["a.log b.log", "worker 7 timed out"],
        )
    direct = _session(OpenAI(base_url=upstream, api_key="k"), "plan", "Which file?", ["a.log", "timeout"])
    assert recorded == direct  # the proxy returned the upstream's replies unchanged

    with serve_in_thread(scenario_files=[out]) as replay:
        client = OpenAI(base_url=replay, api_key="k", max_retries=0)
        replayed = _session(client, "session", "Which file?", ["a.log b.log", "worker 7 timed out"])
        asked = [{"role": "user", "content": "Which file?"}]
        usage = client.chat.completions.create(model="session", messages=asked).usage
        with pytest.raises(BadRequestError, match="No alternative of turn 0"):
            client.chat.completions.create(model="session", messages=[{"role": "user", "content": "Other?"}])
    assert replayed == recorded
    assert usage.prompt_tokens == o200k.prompt_tokens(asked, None)


def test_streamed_sessions_and_several_conversations_replay_by_their_first_user_message(
    upstream: str, tmp_path: Path
):
    """`destructive` answers from the tool result, so the two conversations differ at turn 2."""
    out = tmp_path / "two.json"
    results = {"Free some space.": ["a.log", "deleted"], "Free some space, carefully.": ["a.log", "declined"]}
    with serve_in_thread(create_recorder(upstream=upstream, out=out, name="two")) as proxy:
        client = OpenAI(base_url=proxy, api_key="k", max_retries=0)
        recorded = {
            task: _session(client, "destructive", task, list(r), stream=True) for task, r in results.items()
        }
    assert {task: replies[-1][0] for task, replies in recorded.items()} == {
        "Free some space.": "Deleted access.log to free space.",
        "Free some space, carefully.": "I did not delete anything: you declined the deletion.",
    }
    with serve_in_thread(scenario_files=[out]) as replay:
        client = OpenAI(base_url=replay, api_key="k", max_retries=0)
        for stream in (False, True):
            replayed = {
                task: _session(client, "two", task, list(r), stream=stream) for task, r in results.items()
            }
            assert replayed == recorded


def test_upstream_errors_pass_through_unrecorded_and_a_dead_upstream_is_a_502(upstream: str, tmp_path: Path):
    out = tmp_path / "errors.json"
    unknown = {"model": "nope", "messages": [{"role": "user", "content": "x"}]}
    with (
        serve_in_thread(create_recorder(upstream=upstream, out=out)) as proxy,
        httpx.Client(base_url=proxy) as http,
    ):
        missing = http.post("/chat/completions", json=unknown)
        direct = httpx.post(f"{upstream}/chat/completions", json=unknown)
        models = http.get("/models")
    assert (missing.status_code, missing.content) == (404, direct.content)
    assert missing.json()["error"]["code"] == "model_not_found"
    assert "plan" in {m["id"] for m in models.json()["data"]}
    assert not out.exists()

    with socket.socket() as nobody:  # bound and never listening: a connection to it is refused
        nobody.bind(("127.0.0.1", 0))
        dead_upstream = f"http://127.0.0.1:{nobody.getsockname()[1]}/v1"
        with serve_in_thread(create_recorder(upstream=dead_upstream, out=out)) as proxy:
            dead = httpx.post(f"{proxy}/chat/completions", json={"model": "plan", "messages": []})
    assert (dead.status_code, dead.json()["error"]["code"]) == (502, "upstream_unreachable")


def test_a_streamed_reply_with_text_and_tool_calls_is_read_whole():
    reader = Stream("chat")
    chunks = [
        {"choices": [{"delta": {"role": "assistant", "content": "Let me look. "}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "x1", "function": {"name": "ls", "arguments": ""}}]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]},
        {"choices": [], "usage": {"prompt_tokens": 3}},
    ]
    raw = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
    for i in range(0, len(raw), 7):  # split mid-line, as a network does
        reader.feed(raw[i : i + 7])
    assert reader.reply() == {
        "content": "Let me look. ",
        "tool_calls": [{"name": "ls", "arguments": '{"a":1}', "id": "x1"}],
    }


def _lingering_upstream() -> Starlette:
    """An upstream that streams a whole reply, [DONE] included, then keeps the response open."""

    async def chunks():
        for delta, finish in (({"role": "assistant", "content": "Hello"}, None), ({}, "stop")):
            chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b"data: [DONE]\n\n"
        await asyncio.sleep(2)

    async def chat(request: Request) -> StreamingResponse:
        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def test_a_streamed_reply_is_recorded_when_the_client_hangs_up_after_done(tmp_path: Path):
    # Clients stop reading at [DONE] and close the connection (the openai client does), which
    # cancels the relay; a reply recorded only after the upstream's stream ends was then lost.
    out = tmp_path / "hangup.json"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with serve_in_thread(_lingering_upstream()) as upstream, \
            serve_in_thread(create_recorder(upstream=upstream, out=out)) as proxy:
        with httpx.Client() as http, http.stream("POST", f"{proxy}/chat/completions", json=body) as response:
            for line in response.iter_lines():
                if line == "data: [DONE]":
                    break
        deadline = time.monotonic() + 5
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert out.exists(), "the streamed reply was not recorded"
    assert json.loads(out.read_text())["turns"] == [[{"if": {"user_contains": "hi"}, "content": "Hello"}]]


def test_a_streamed_reply_keeps_its_tool_calls_in_index_order_past_ten():
    # Parallel calls arrive by `index`; 10 must follow 9, not 1 (as a text sort puts it).
    reader = Stream("chat")
    for index in range(12):
        part = {"index": index, "id": f"c{index}", "function": {"name": "ping", "arguments": "{}"}}
        reader.feed(f"data: {json.dumps({'choices': [{'delta': {'tool_calls': [part]}}]})}\n\n".encode())
    assert [call["id"] for call in reader.reply()["tool_calls"]] == [f"c{index}" for index in range(12)]


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"out": "x.toml"}, "give --out a .json name"),
        ({"out": "x.json", "upstream": "127.0.0.1:8080"}, "must be an http(s) base URL"),
        ({"out": "x.json", "name": "a+b"}, "cannot be a model name"),
    ],
)
def test_the_recorder_refuses_bad_arguments_up_front(kwargs: dict[str, str], problem: str):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        create_recorder(**{"upstream": "http://127.0.0.1:8080/v1", **kwargs})


def test_python_m_mockprovider_record_on_port_0_serves_where_it_says(upstream: str, tmp_path: Path):
    out = tmp_path / "cli.json"
    command = [sys.executable, "-m", "mockprovider", "record", "--upstream", upstream, "--out", str(out),
               "--port", "0"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stderr is not None
            first = proc.stderr.readline()  # the socket is bound before this line is written
            base_url = first.split(" at ", 1)[1].split(" -> ", 1)[0]
            deadline = time.monotonic() + 20
            while True:
                assert proc.poll() is None, "the recorder exited"
                try:
                    httpx.get(f"{base_url.removesuffix('/v1')}/healthz", timeout=1)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "the recorder did not start"
                    time.sleep(0.05)
            with OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
                client.chat.completions.create(model="once", messages=[{"role": "user", "content": "go"}],
                                               tools=TOOLS)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=10)
    assert not base_url.endswith(":0/v1")
    assert "recorded turn 0 (list_files)" in err
    assert json.loads(out.read_text())["turns"][0][0]["tool_calls"][0]["name"] == "list_files"


def test_a_reply_no_script_can_hold_is_logged_and_left_out(tmp_path: Path):
    app = create_recorder(upstream="http://127.0.0.1:9/v1", out=tmp_path / "odd.json")
    nameless = {"tool_calls": [{"id": "x", "name": "", "arguments": "{}"}]}
    line = app.state.recorder.recording.add("hi", 0, "m", nameless)
    assert line.startswith(
        "not recorded: the upstream's reply: $.turns[0][0].tool_calls[0].name: expected a non-empty"
    )
    assert not (tmp_path / "odd.json").exists()


def test_the_recorder_bounds_request_bodies(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(proxy_module, "MAX_BODY_BYTES", 100)
    with serve_in_thread(
        create_recorder(upstream="http://127.0.0.1:9/v1", out=tmp_path / "big.json")
    ) as proxy:
        response = httpx.post(
            f"{proxy}/chat/completions", json={"model": "plan", "messages": [], "pad": "x" * 200}
        )
    assert (response.status_code, response.json()["error"]["code"]) == (413, "request_too_large")
