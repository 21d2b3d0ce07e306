"""Faults inside a reply, keyed by (turn, attempt): each SDK meets them as it meets a real one.

A stream that fails after it started is not retried by the official clients (the reply was
already handed to the caller); a body cut before the client finished reading it, and a 529,
are retried.
"""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest
from spec_support import errors

from mockprovider.replies import midstream
from mockprovider.scripts.options import Fault

QUESTION = "Which file mentions a timeout?"
ANSWER_TURN = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "Listing."},
               {"role": "assistant", "content": "Reading."}]


def _openai(url: str, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=retries)


def _anthropic(url: str, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="unused", max_retries=retries)


def test_a_chat_stream_error_arrives_after_n_chunks_and_is_not_retried(mock_url):
    received = []
    with _openai(mock_url, retries=2) as client, pytest.raises(openai.APIError) as caught:
        for chunk in client.chat.completions.create(
                model="plan+fault=stream_error:3@2", messages=ANSWER_TURN, stream=True):
            received.append(chunk)
    assert len(received) == 3
    assert "injected fault" in caught.value.message and caught.value.body["type"] == "server_error"


def test_a_dropped_chat_stream_is_a_connection_error_mid_iteration(mock_url):
    received = []
    with _openai(mock_url, retries=2) as client, pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(
                model="plan+fault=drop:2@2", messages=ANSWER_TURN, stream=True):
            received.append(chunk)
    assert len(received) == 2


def test_a_body_dropped_before_it_was_read_is_retried_by_the_sdk(mock_url):
    model = "plan+fault=drop@2x1"  # only the first attempt is cut
    with _openai(mock_url) as client, pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model=model, messages=ANSWER_TURN)
    with _openai(mock_url, retries=1) as client:
        reply = client.chat.completions.create(model=model, messages=ANSWER_TURN)
    assert reply.choices[0].finish_reason == "stop"


def test_a_drop_after_ms_cuts_a_paced_stream_part_way(mock_url):
    deltas = []
    with _openai(mock_url) as client, pytest.raises(openai.APIConnectionError):
        for chunk in client.chat.completions.create(
                model="plan+rate=50+fault=drop:100ms@2", messages=ANSWER_TURN, stream=True):
            deltas += [c.delta.content for c in chunk.choices if c.delta.content]
    assert 1 <= len(deltas) < 17  # the answer is 17 tokens; at 50 tokens/s the cut comes after ~3


def test_a_responses_stream_error_ends_with_response_failed(mock_url):
    with _openai(mock_url) as client:
        model = "plan+fault=stream_error:4@2"
        events = list(client.responses.create(model=model, input=ANSWER_TURN, stream=True))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert len(events) == 5 and events[-1].type == "response.failed"
    assert events[-1].sequence_number == 4
    assert (events[-1].response.status, events[-1].response.error.code) == ("failed", "server_error")
    assert errors(events[-1].model_dump(mode="json", exclude_unset=True), "ResponseStreamEvent") == []


@pytest.mark.parametrize("after", ["0", "0ms"])
def test_a_responses_stream_error_before_any_event_still_opens_with_response_created(mock_url, after):
    """Every Responses stream opens with response.created (a failure before it is an HTTP error),
    and the SDK's stream helper refuses a stream that opens with anything else."""
    with _openai(mock_url) as client:
        with client.responses.stream(model=f"plan+fault=stream_error:{after}", input=QUESTION) as stream:
            events = list(stream)
    assert [(e.type, e.sequence_number) for e in events] == [("response.created", 0), ("response.failed", 1)]


def test_a_messages_stream_error_is_an_overloaded_error_event(mock_url):
    seen = []
    with _anthropic(mock_url, retries=2) as client, pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(model="plan+fault=stream_error:2@2", max_tokens=100,
                                    messages=[{"role": "user", "content": QUESTION}] + [
                                        {"role": "assistant", "content": "Listing."},
                                        {"role": "user", "content": "go on"},
                                        {"role": "assistant", "content": "Reading."},
                                        {"role": "user", "content": "go on"}]) as stream:
            for event in stream:
                seen.append(event.type)
    assert seen[:1] == ["message_start"] and len(seen) <= 2
    assert caught.value.body["error"]["type"] == "overloaded_error"


def test_a_messages_stream_error_names_the_request_id_its_reply_headers_carry(mock_url):
    """Anthropic's mid-stream error event carries the request's id, as its error bodies do."""
    with _anthropic(mock_url) as client, pytest.raises(anthropic.APIStatusError) as caught:
        for _ in client.messages.create(model="plan+fault=stream_error:1", max_tokens=100, stream=True,
                                        messages=[{"role": "user", "content": QUESTION}]):
            pass
    header = caught.value.response.headers["request-id"]
    assert header.startswith("req_") and caught.value.body["request_id"] == header


def test_a_529_is_overloaded_and_the_anthropic_sdk_retries_it(mock_url):
    request = {"max_tokens": 100, "messages": [{"role": "user", "content": QUESTION}],
               "tools": [{"name": "list_files", "input_schema": {"type": "object"}}]}
    with _anthropic(mock_url) as client, pytest.raises(anthropic.OverloadedError) as caught:
        client.messages.create(model="plan+fault=529@0x1", **request)
    assert caught.value.status_code == 529
    with _anthropic(mock_url, retries=1) as client:
        message = client.messages.create(model="plan+fault=529@0x1+retry=0", **request)
    assert message.stop_reason == "tool_use"


@pytest.mark.parametrize("option", ["fault=429:3", "fault=drop:x", "fault=stream_error:3ms"])
def test_a_bad_midstream_fault_is_a_400_naming_the_syntax(in_process, option):
    response = in_process.post("/v1/chat/completions", json={
        "model": f"plan+{option}", "messages": [{"role": "user", "content": QUESTION}]})
    if option.endswith("3ms"):  # a valid time: accepted
        assert response.status_code == 500  # stream_error on a reply that is not streamed
        return
    assert response.status_code == 400 and "fault" in response.json()["error"]["message"]


@pytest.mark.parametrize("after", ["300001ms", "999999999ms"])
def test_a_fault_time_past_the_five_minute_bound_is_a_400_not_a_held_connection(in_process, after):
    """A cut timed past every other wait's bound (latency, hang: five minutes) would hold the
    connection for days; it is refused like an out-of-range latency."""
    def post(fault: str):
        return in_process.post("/v1/chat/completions", json={
            "model": f"plan+fault={fault}", "messages": [{"role": "user", "content": QUESTION}]})

    refused, bounded = post(f"stream_error:{after}"), post("stream_error:300000ms")
    assert refused.status_code == 400 and "300000" in refused.json()["error"]["message"]
    assert bounded.status_code == 500  # accepted: stream_error on a reply that is not streamed


def test_formats_without_midstream_faults_answer_them_as_broken_replies_not_silence(in_process):
    """A reply that is not streamed: a drop is a broken body, a stream_error a 500."""
    gemini = {"contents": [{"role": "user", "parts": [{"text": QUESTION}]}]}
    dropped = in_process.post("/v1beta/models/plan+fault=drop@0:generateContent", json=gemini)
    ollama = {"model": "plan+fault=stream_error@0", "stream": False,
              "messages": [{"role": "user", "content": QUESTION}]}
    failed = in_process.post("/api/chat", json=ollama)
    assert dropped.status_code == 200 and not dropped.text.rstrip().endswith("}")
    assert failed.status_code == 500


def _read(stream) -> tuple[list[str | None], Exception | None]:
    """The event types a stream yields before it ends, and the exception it ends with, if any."""
    types: list[str | None] = []
    try:
        for event in stream():
            types.append(getattr(event, "type", None))
    except Exception as e:  # each SDK's own way to report a broken body
        return types, e
    return types, None


@pytest.mark.parametrize("kind", ["stream_error", "drop"])
def test_a_fault_after_more_events_than_the_stream_has_still_cuts_it_before_its_end(mock_url, kind):
    """N past the stream's length: the fault replaces the final event in every format, so a
    stream never ends both finished and failed (Responses' completed then failed, Messages'
    message_stop then an error) nor finished in one format and failed in another."""
    model = f"plan+fault={kind}:100000"
    with _openai(mock_url) as oai, _anthropic(mock_url) as claude:
        streams = {
            "chat": lambda: oai.chat.completions.create(model=model, messages=ANSWER_TURN, stream=True),
            "responses": lambda: oai.responses.create(model=model, input=QUESTION, stream=True),
            "messages": lambda: claude.messages.create(model=model, max_tokens=100, stream=True,
                                                       messages=[{"role": "user", "content": QUESTION}]),
        }
        for name, stream in streams.items():
            types, error = _read(stream)
            assert error is not None or types[-1:] == ["response.failed"], name
            assert "response.completed" not in types and "message_stop" not in types, name


@pytest.mark.parametrize("kind", ["stream_error", "drop"])
def test_a_fault_after_ms_never_sends_the_last_event_though_the_timer_fires_early(monkeypatch, kind):
    """The last event waits for the cut: a loop's timer that fires a little early (uvloop's clock
    has millisecond steps) must not let it out, `[DONE]` before the error."""
    async def early(delay: float, result: object = None) -> object:  # a timer that fires at once
        return result

    async def events() -> list[bytes]:
        error = (lambda sent: b"error after %d" % sent) if kind == "stream_error" else None
        return [e async for e in midstream.cut([b"one", b"two", b"[DONE]"], Fault(kind=kind, after_ms=50),
                                                error)]

    monkeypatch.setattr(asyncio, "sleep", early)
    sent = asyncio.run(events())
    assert sent == ([b"one", b"two", b"error after 2"] if kind == "stream_error" else [b"one", b"two"])


def _stream_once(client: openai.OpenAI, model: str, messages: list) -> str:
    return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model=model, messages=messages, stream=True) if c.choices)


@pytest.mark.parametrize(("options", "cut_every_time"), [("", True), ("+attempt=seen", False)])
def test_an_agents_own_retry_after_a_cut_meets_the_fault_once_only_with_attempt_seen(
        mock_url, options, cut_every_time):
    """The agent retries a stream cut mid-way itself: a fresh SDK call, which says attempt 0
    again. `attempt=seen` counts the same request sent again as the next attempt instead."""
    messages = [*ANSWER_TURN[:1], {"role": "user", "content": f"cut me once{options}"}, *ANSWER_TURN[1:]]
    model = f"plan+fault=drop:2@2{options}"
    outcomes = []
    with _openai(mock_url, retries=2) as client:
        for _ in range(3):  # the agent's own loop: try, and on a broken stream try again
            try:
                outcomes.append(_stream_once(client, model, messages))
            except openai.APIConnectionError:
                outcomes.append("cut")
    if cut_every_time:
        assert outcomes == ["cut", "cut", "cut"]
    else:
        assert outcomes[0] == "cut" and outcomes[1].startswith("errors.log") and outcomes[2] == "cut"
