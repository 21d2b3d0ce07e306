"""A plain chat request is answered as its bytes are parsed (apis.chat_at_once), with the reply the
chat lane would send; every other request is left to the lane, with nothing sent."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
import uuid

import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from experiments.bench import trick_protocol
from experiments.bench.floor import request_body
from mockprovider.apis import chat_at_once
from mockprovider.app import create_app
from mockprovider.reading import body as body_module
from mockprovider.reading import memo
from mockprovider.replies.faults import log as faults_log
from mockprovider.server import serve_in_thread

TURN_1 = json.loads(request_body(1, task="at once"))


def _request(body: dict | bytes, *, headers: dict[str, str] | None = None,
             path: bytes = b"/v1/chat/completions", content_type: bytes = b"application/json") -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in (headers or {}).items())
    return (b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-type: %s\r\n%scontent-length: %d\r\n\r\n%s"
            % (path, content_type, lines, len(raw), raw))


class _Served:
    """An app on one connection of the mock's own server, fed bytes from the loop as a socket's
    come."""

    def __init__(self, app) -> None:
        self.loop = asyncio.new_event_loop()
        self.connection, self.transport = trick_protocol.connection(app, self.loop)

    def send(self, *parts: bytes) -> bytes:
        """What was written back to `parts`, fed one after another, the loop run after each."""
        self.transport.writes.clear()
        for part in parts:
            self.loop.call_soon(self.connection.data_received, part)
            self.loop.run_until_complete(asyncio.sleep(0.02))
        return b"".join(self.transport.writes)

    def close(self) -> None:
        self.loop.close()


@pytest.fixture
def served():
    made = []

    def serve(app=None):
        made.append(_Served(app or create_app()))
        return made[-1]

    yield serve
    for one in made:
        one.close()


@pytest.fixture(autouse=True, scope="module")
def _agent_tools_counted():
    """The agent loop's tool list counted once, as the first request that carries it is (on the
    lane): each test here may run alone, first, or on its own worker."""
    lane = _Served(trick_protocol.lane_only(create_app()))
    try:
        assert lane.send(_request(TURN_1)).startswith(b"HTTP/1.1 200 OK")
    finally:
        lane.close()


@pytest.fixture
def answered(monkeypatch) -> list[bool]:
    """What `chat_at_once.answer` said of each request it was asked about."""
    said = []
    answer = chat_at_once.answer

    def noted(*args):
        said.append(answer(*args))
        return said[-1]

    monkeypatch.setattr(chat_at_once, "answer", noted)
    return said


def _without_ids(reply: bytes) -> bytes:
    """`reply` bar what differs from reply to reply: ids, clocks."""
    reply = re.sub(rb"(date|x-request-id|openai-processing-ms): [^\r]*\r\n", b"", reply)
    return re.sub(rb'"(id|created)":("[^"]*"|\d+)', b"", reply)


PLAIN_BODIES = {
    "turn 1 of an agent loop": TURN_1,
    "turn 100 of an agent loop": json.loads(request_body(100, task="at once, long")),
    "no tools": {"model": "plan", "messages": [{"role": "user", "content": "Hi"}]},
    "tool_choice and max_completion_tokens": {**TURN_1, "tool_choice": "auto", "max_completion_tokens": 5},
    "a sampling setting": {**TURN_1, "temperature": 0.5, "user": "u"},
}


@pytest.mark.parametrize("body", PLAIN_BODIES.values(), ids=PLAIN_BODIES.keys())
def test_a_plain_chat_request_is_answered_at_once_with_the_reply_the_lane_sends(served, answered, body):
    at_once, lane = served(), served(trick_protocol.lane_only(create_app()))
    theirs = lane.send(_request(body))  # first: a tool list is counted where it is first seen
    assert answered == []  # the lane's own, not asked
    mine = at_once.send(_request(body))
    assert answered == [True]
    assert mine.startswith(b"HTTP/1.1 200 OK\r\n")
    assert _without_ids(mine) == _without_ids(theirs)
    assert re.search(rb"x-request-id: req_[0-9a-f]{24}\r\n", mine)


def test_a_tool_list_is_counted_on_the_lane_the_first_time_and_its_count_kept_for_the_next(served, answered):
    new = {"name": "list_files", "description": f"seen first here ({uuid.uuid4()})"}
    body = {**TURN_1, "tools": [{"type": "function", "function": new}]}
    one = served()
    first, second = one.send(_request(body)), one.send(_request(body))
    assert answered == [False, True]
    assert _without_ids(first) == _without_ids(second)


def test_the_next_turn_reads_what_a_request_answered_at_once_remembered_after_its_reply(served, answered,
                                                                                        monkeypatch):
    memo.MEMORY.clear()
    one = served()
    seen = []
    remember = memo.MEMORY.remember

    def noted(entry, replaces=None):
        seen.append((len(entry.messages), replaces is not None, bool(one.transport.writes)))
        remember(entry, replaces)

    monkeypatch.setattr(memo.MEMORY, "remember", noted)
    for turn in (10, 11):
        assert one.send(_request(request_body(turn, task="remembered"))).startswith(b"HTTP/1.1 200 OK")
    assert answered == [True, True]
    assert seen == [(22, False, True), (24, True, True)]  # written first; turn 11 extends turn 10


def _scripted(name: str, turn: dict) -> dict:
    return {"name": name, "turns": [turn], "after_last": "repeat"}


LEFT_TO_THE_LANE = {
    # what is sent, the app's settings, the status the lane answers with
    "a stream": (dict(body={**TURN_1, "stream": True}), {}, 200),
    "options in a header": (dict(body=TURN_1, headers={"x-mock-options": "latency=0"}), {}, 200),
    "a test's id": (dict(body=TURN_1, headers={"x-test-id": "t1"}), {}, 200),
    "a key, given": (dict(body=TURN_1, headers={"authorization": "Bearer k"}), {"api_key": "k"}, 200),
    "a key, missing": (dict(body=TURN_1), {"api_key": "k"}, 401),
    "a journal": (dict(body=TURN_1), {"journal": 4}, 200),
    "options in the model's name": (dict(body={**TURN_1, "model": "runaway+latency=0"}), {}, 200),
    "an unknown model": (dict(body={**TURN_1, "model": "nope"}), {}, 404),
    "no JSON": (dict(body=b"{not json"), {}, 400),
    "another content type": (dict(body=TURN_1, content_type=b"text/plain"), {}, 415),
    "a body past the cap": (dict(body=TURN_1), {"max_body_bytes": 100}, 413),
    "a server latency": (dict(body=TURN_1), {"latency_ms": 1}, 200),
    "a scripted error": (
        dict(body={**TURN_1, "model": "limited"}),
        {"scenario_files": [_scripted("limited", {"error": {"status": 429, "message": "m"}})]}, 429),
    "a scripted latency": (dict(body={**TURN_1, "model": "unhurried"}),
                           {"scenario_files": [_scripted("unhurried", {"content": "x", "latency": 1})]}, 200),
    "a tool forced that is not offered": (
        dict(body={**TURN_1, "tool_choice": {"type": "function", "function": {"name": "nope"}}}), {}, 400),
    "an options prefix": (dict(body=TURN_1, path=b"/o/latency=0/v1/chat/completions"), {}, 200),
}


@pytest.mark.parametrize(("sent", "settings", "status"), LEFT_TO_THE_LANE.values(),
                         ids=LEFT_TO_THE_LANE.keys())
def test_any_other_request_is_left_to_the_lane_with_nothing_sent(served, answered, sent, settings, status):
    app = create_app(**settings)
    at_once, lane = served(app), served(trick_protocol.lane_only(create_app(**settings)))
    mine = at_once.send(_request(**sent))
    assert answered in ([False], [])  # asked and declined, or (off the lane's path) not asked
    theirs = lane.send(_request(**sent))
    assert mine.startswith(b"HTTP/1.1 %d " % status)
    assert _without_ids(mine) == _without_ids(theirs)
    if "journal" in settings:  # what the lane journals, it journals still
        assert len(app.state.config.journal.entries()) == 1


def _logged(records) -> list[str]:
    return [r.getMessage() for r in records if r.name == faults_log.name]


ATTEMPTS_SENT = {
    "none": ({}, 0),
    "the SDK's retry count": ({"x-stainless-retry-count": "2"}, 2),
    "the lab's, first": ({"x-lab-attempt": "3", "x-stainless-retry-count": "1"}, 3),
    "not a number": ({"x-lab-attempt": "²", "x-stainless-retry-count": "1"}, 1),
}


@pytest.mark.parametrize(("sent", "attempt"), ATTEMPTS_SENT.values(), ids=ATTEMPTS_SENT.keys())
def test_with_the_request_log_on_a_request_answered_at_once_logs_the_lanes_line_before_its_reply(
        served, answered, caplog, sent, attempt):
    at_once, lane = served(), served(trick_protocol.lane_only(create_app()))
    written_when_logged = []

    class Noting(logging.Handler):
        def emit(self, record):
            written_when_logged.append(bool(at_once.transport.writes))

    noting = Noting()
    faults_log.addHandler(noting)
    try:
        with caplog.at_level(logging.INFO, logger=faults_log.name):
            theirs = lane.send(_request(TURN_1, headers=sent))  # first: where a tool list is first counted
            written_when_logged.clear()
            mine = at_once.send(_request(TURN_1, headers=sent))
            assert answered == [True]
            assert written_when_logged == [False]  # logged first, as the lane logs before it replies
    finally:
        faults_log.removeHandler(noting)
    assert _logged(caplog.records) == [f"model=runaway turn=1 attempt={attempt} status=ok"] * 2
    assert mine.startswith(b"HTTP/1.1 200 OK") and _without_ids(mine) == _without_ids(theirs)


def test_with_the_request_log_on_a_request_left_to_the_lane_is_logged_once(served, answered, caplog):
    one = served()
    with caplog.at_level(logging.INFO, logger=faults_log.name):
        assert one.send(_request({**TURN_1, "stream": True})).startswith(b"HTTP/1.1 200 OK")
        assert one.send(_request(TURN_1, headers={"x-mock-options": "ratelimit=5:500"})).startswith(
            b"HTTP/1.1 200 OK")
    assert answered == [False, False]
    assert _logged(caplog.records) == ["model=runaway turn=1 attempt=0 status=ok"] * 2


def test_with_the_request_log_on_the_line_names_the_model_turn_and_first_attempt_as_the_lanes_does(
        served, answered, caplog):
    at_once, lane = served(), served(trick_protocol.lane_only(create_app()))
    body = {**json.loads(request_body(100, task="logged at turn 100")), "model": "runaway+"}
    raw = _request(body, headers={"x-lab-attempt": "5"}).replace(  # a repeated header: the first wins
        b"content-length", b"x-lab-attempt: 7\r\ncontent-length", 1)
    with caplog.at_level(logging.INFO, logger=faults_log.name):
        theirs, mine = lane.send(raw), at_once.send(raw)
    assert answered == [True]
    assert _logged(caplog.records) == ["model=runaway+ turn=100 attempt=5 status=ok"] * 2
    assert _without_ids(mine) == _without_ids(theirs)


LATE_DECLINES = {  # declined after the body is read, where the line would be logged
    "a tool list not yet counted": lambda: {**TURN_1, "tools": [{"type": "function", "function": {
        "name": "list_files", "description": f"new ({uuid.uuid4()})"}}]},
    "a scripted error": lambda: {**TURN_1, "model": "limited"},
    "a scripted latency": lambda: {**TURN_1, "model": "unhurried"},
}


@pytest.mark.parametrize("body", LATE_DECLINES.values(), ids=LATE_DECLINES.keys())
def test_with_the_request_log_on_a_request_declined_late_is_logged_once(served, answered, caplog, body):
    one = served(create_app(scenario_files=[_scripted("limited", {"error": {"status": 429, "message": "m"}}),
                                            _scripted("unhurried", {"content": "x", "latency": 1})]))
    with caplog.at_level(logging.INFO, logger=faults_log.name):
        one.send(_request(body(), headers={"x-lab-attempt": "2"}))
    assert answered == [False]
    assert _logged(caplog.records) == [f"model={body()['model']} turn=1 attempt=2 status=ok"]


def test_with_the_request_log_on_an_attempt_the_server_counts_is_left_to_the_lane(served, answered, caplog):
    app = create_app()
    config = app.state.config
    seen = dataclasses.replace(config.defaults, attempt="seen")
    app.state.config = dataclasses.replace(config, defaults=seen)
    one = served(app)
    with caplog.at_level(logging.INFO, logger=faults_log.name):
        for _ in range(2):  # counted by the server each time (and forgotten once answered)
            assert one.send(_request(TURN_1)).startswith(b"HTTP/1.1 200 OK")
    assert answered == [False, False]
    assert _logged(caplog.records) == ["model=runaway turn=1 attempt=0 status=ok"] * 2


def test_an_unforeseen_error_there_leaves_the_request_to_the_lane(served, answered, monkeypatch):
    def broken(raw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat_at_once, "read_chat_body", broken)
    one = served()
    assert one.send(_request(TURN_1)).startswith(b"HTTP/1.1 200 OK")
    assert answered == [False]


def test_a_request_answered_at_once_is_counted_in_the_metrics(served, answered):
    one = served()
    one.send(_request(TURN_1))
    page = one.send(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").decode().partition("\r\n\r\n")[2]
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(page) for s in family.samples}
    assert answered == [True]
    route = ("route", "/v1/chat/completions")
    assert samples[("mockprovider_requests_total", (route, ("scenario", "runaway"), ("status", "200")))] == 1
    assert samples[("mockprovider_request_seconds_count", (route,))] == 1


def test_the_official_client_is_answered_at_once_over_a_real_socket(answered):
    """Once its tool list is counted (its first request, on the lane)."""
    tools = [{"type": "function", "function": {"name": "list_files", "description": f"({uuid.uuid4()})"}}]
    with serve_in_thread() as url, OpenAI(base_url=url, api_key="k", max_retries=0) as client:
        for _ in range(3):
            reply = client.chat.completions.with_raw_response.create(
                model="runaway", messages=TURN_1["messages"], tools=tools)
            completion = reply.parse()
            assert completion.choices[0].message.tool_calls[0].function.name == "list_files"
            assert reply.headers["x-request-id"].startswith("req_")
    assert answered == [False, True, True]


def _split(request: bytes) -> tuple[bytes, bytes]:
    """`request`'s head and its body, as a client writing them apart sends them."""
    head, _, body = request.partition(b"\r\n\r\n")
    return head + b"\r\n\r\n", body


def test_a_head_that_came_alone_waits_unrun_for_its_body_and_is_answered_at_once(served, answered):
    one = served()
    one.send(_request(TURN_1))  # its tool list counted
    head, body = _split(_request(TURN_1))
    assert one.send(head) == b""
    assert one.connection.held is not None and answered == [True]
    reply = one.send(body)
    assert reply.startswith(b"HTTP/1.1 200 OK") and answered == [True, True]
    assert one.connection.held is None


def test_the_rest_of_a_held_body_and_a_pipelined_request_behind_it_are_answered_in_order(served, answered):
    one = served()
    one.send(_request(TURN_1))
    head, body = _split(_request(TURN_1))
    other = _request({"model": "plan", "messages": [{"role": "user", "content": "Hi"}]})
    replies = one.send(head, body + other)
    assert replies.count(b"HTTP/1.1 200 OK") == 2
    assert replies.index(b'"list_files"') < replies.index(b'"model":"plan"')
    assert answered[:2] == [True, True]


def test_a_client_awaiting_100_continue_is_not_held_but_told_to_go_on(served, answered):
    one = served()
    head, body = _split(_request(TURN_1, headers={"expect": "100-continue"}))
    assert one.send(head) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert one.connection.held is None
    assert one.send(body).startswith(b"HTTP/1.1 200 OK")


def test_a_body_longer_than_the_connection_reads_unpaused_is_not_held(served, answered):
    long = {**TURN_1, "messages": [{"role": "user", "content": "x " * 40_000}]}
    one = served()
    head, body = _split(_request(long))
    assert one.send(head) == b""
    assert one.connection.held is None  # the lane runs, waiting for the body as it reads it
    assert one.send(body[:30_000], body[30_000:]).startswith(b"HTTP/1.1 200 OK")
    assert answered == []


def test_a_connection_lost_while_its_request_is_held_leaves_it_to_the_lane_which_drops_it(served, answered,
                                                                                          caplog):
    one = served()
    head, _ = _split(_request(TURN_1))
    one.send(head)
    assert one.connection.held is not None
    with caplog.at_level(logging.INFO, logger="mockprovider"):
        one.connection.connection_lost(None)
        one.loop.run_until_complete(asyncio.sleep(0.02))
    assert one.connection.held is None and one.transport.writes == [] and answered == []
    assert any("the client left while its request waited; dropped" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("sent", "settings", "status"), [
    (dict(body=TURN_1, headers={"authorization": "Bearer wrong"}), {"api_key": "k"}, 401),
    (dict(body=TURN_1), {"max_body_bytes": 100}, 413),
    (dict(body=TURN_1, content_type=b"text/plain"), {}, 415),
], ids=["a wrong key", "a body past the cap", "another content type"])
def test_a_head_alone_that_will_not_be_answered_at_once_is_refused_unheld(served, sent, settings, status):
    one = served(create_app(**settings))
    head, _ = _split(_request(**sent))
    assert one.send(head).startswith(b"HTTP/1.1 %d " % status)
    assert one.connection.held is None


def test_a_client_not_reading_its_replies_is_answered_by_the_lane_once_it_reads(served, answered):
    one = served()
    one.send(_request(TURN_1))  # its tool list counted
    answered.clear()
    one.connection.pause_writing()  # the transport's buffer is full
    assert one.send(_request(TURN_1)) == b""
    assert answered == []  # not asked
    one.connection.resume_writing()
    one.loop.run_until_complete(asyncio.sleep(0.02))
    assert b"".join(one.transport.writes).startswith(b"HTTP/1.1 200 OK")


def test_a_request_held_at_shutdown_is_given_to_the_lane_which_waits_for_its_body(served):
    one = served()
    one.send(_request(TURN_1))
    head, body = _split(_request(TURN_1))
    one.send(head)
    assert one.connection.held is not None
    one.connection.shutdown()
    assert one.connection.held is None and len(one.connection.tasks) == 1
    assert one.send(body).startswith(b"HTTP/1.1 200 OK")  # and the connection closes after it
    assert b"connection: close\r\n" in b"".join(one.transport.writes) and one.transport.closed


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """Each reading of a chat body: 1 where the at-once path reads it, 2 where the lane does."""
    seen = []
    read = chat_at_once.read_chat_body
    monkeypatch.setattr(chat_at_once, "read_chat_body", lambda raw: seen.append(1) or read(raw))
    monkeypatch.setattr(body_module, "read_chat_body", lambda raw: seen.append(2) or read(raw))
    return seen


def test_a_declined_stream_is_not_read_twice(served, answered, reads):
    one = served()
    one.send(_request(TURN_1))  # its tool list counted
    reads.clear()
    answered.clear()
    assert one.send(_request({**TURN_1, "stream": True})).endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
    assert answered == [False] and reads == [1]


def test_a_held_requests_time_runs_from_its_head_as_the_lanes_does(served, answered):
    app = create_app()
    one = served(app)
    one.send(_request(TURN_1))
    head, body = _split(_request(TURN_1))
    one.send(head)
    one.loop.run_until_complete(asyncio.sleep(0.05))  # the body comes 50 ms later
    reply = one.send(body)
    assert answered == [True, True]
    assert int(re.search(rb"openai-processing-ms: (\d+)", reply)[1]) >= 50
    assert app.state.metrics.requests._times["/v1/chat/completions"][-2] >= 0.05


def test_a_body_refused_there_is_refused_by_the_lane_unread_again(served, answered, reads):
    one = served()
    reply = one.send(_request(b'{"model": "runaway", "messages": [{"role": "user", "content": "\\ud800"}]}'))
    assert reply.startswith(b"HTTP/1.1 400 ") and answered == [False] and reads == [1]


def test_the_lane_only_copy_holds_no_head(served):
    one = served(trick_protocol.lane_only(create_app()))
    head, body = _split(_request(TURN_1))
    one.send(head)
    assert one.connection.held is None and len(one.connection.tasks) == 1  # the lane waits for the body
    assert one.send(body).startswith(b"HTTP/1.1 200 OK")
