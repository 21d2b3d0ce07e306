"""Every speed trick in the mock beside the plain code it replaces: same inputs, same output, one
run, interleaved (experiments/bench/tricks.py); `make bench` puts the ratios on results/bench.md."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

import pytest

from experiments.bench import trick_pairs
from experiments.bench.floor import request_body, runaway_messages
from experiments.bench.tricks import LANE, Trick, check_same, measure, savings
from mockprovider import create_app, protocol
from mockprovider.apis import chat, chat_at_once, steps
from mockprovider.apis.chat import chat_completions
from mockprovider.metrics import RequestSeries
from mockprovider.reading import memo, transcript, validation
from mockprovider.replies import completions, faults, headers


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def tricks(loop) -> list[Trick]:
    return trick_pairs.all_tricks(loop)


def test_every_trick_answers_what_the_plain_code_answers(tricks):
    for trick in tricks:
        check_same(trick)  # raises, naming the trick and both outputs, if they differ


def test_a_trick_whose_output_differs_from_the_plain_code_is_refused():
    def batch(value):
        return lambda n: (lambda: value)

    with pytest.raises(AssertionError, match="wrong trick: with the trick 1, without it 2"):
        check_same(Trick(name="wrong trick", where="nowhere", turn=1, with_=batch(1), without=batch(2)))


def test_a_self_timed_trick_is_timed_by_the_seconds_its_batches_report():
    """A trick that moves work after a reply is timed to the reply, as its batches report it."""
    def batch(seconds):
        return lambda n: (lambda: ("same", seconds * n))

    trick = Trick(name="self-timed", where="nowhere", turn=1, with_=batch(0.001), without=batch(0.003),
                  batch=4, self_timed=True)
    with_us, without_us, ratio = measure(trick, rounds=3)
    assert (with_us, without_us, ratio) == (pytest.approx(1000), pytest.approx(3000), pytest.approx(3))


def test_the_rerun_row_finds_turn_99_on_its_own_side_only(tricks, monkeypatch):
    """The row times a lookup past longer runs of the same task: the mock's finds turn 99, the walk
    it replaces does not (were both to find it, or both to miss, the row would read about 1x)."""
    trick = next(t for t in tricks if t.name == "transcript found past longer runs of its task")
    found = []
    parse = memo.parse

    def counting(raw, memory=memo.MEMORY):
        body, known = parse(raw, memory)
        found.append(known.count)
        return body, known

    monkeypatch.setattr(memo, "parse", counting)
    trick.with_(1)()
    trick.without(1)()
    assert found == [len(runaway_messages(99)), 0]


def test_the_remembered_later_trick_defers_the_memory_on_its_own_side_only(tricks, monkeypatch):
    """If the lane stopped deferring, the row would quietly read about 1x with nothing failing."""
    trick = next(t for t in tricks if t.name == "transcript remembered after the reply")
    deferred = []
    real = chat.remembered_later
    monkeypatch.setattr(chat, "remembered_later",
                        lambda read, scope: deferred.append(1) or real(read, scope))
    for side, expected in ((trick.with_, [1]), (trick.without, [])):
        go = side(1)
        deferred.clear()
        go()
        assert deferred == expected


def test_the_answered_at_once_row_answers_at_once_on_its_own_side_only(tricks, monkeypatch):
    """If the step stopped answering, the row would quietly read about 1x with nothing failing."""
    trick = next(t for t in tricks if t.name == "a chat request answered at once")
    said = []
    answer = chat_at_once.answer
    monkeypatch.setattr(chat_at_once, "answer", lambda *args: said.append(answer(*args)) or said[-1])
    for side, expected in ((trick.with_, [True] * 2), (trick.without, [])):
        go = side(2)
        said.clear()
        go()
        assert said == expected


def test_the_started_without_task_row_makes_tasks_on_its_plain_side_only(tricks, monkeypatch):
    """Both sides answer through the chat lane (`lane_only`): the row times the task alone."""
    trick = next(t for t in tricks if t.name == "a request started without a task")
    tasks, answered = [], []
    in_task = protocol.Http11._in_task
    monkeypatch.setattr(protocol.Http11, "_in_task", lambda self, *a: tasks.append(1) or in_task(self, *a))
    monkeypatch.setattr(chat_at_once, "answer", lambda *args: answered.append(1))
    for side, expected in ((trick.with_, []), (trick.without, [1, 1])):
        go = side(2)
        tasks.clear()
        go()
        assert tasks == expected
    assert answered == []


def test_the_lane_is_compared_with_the_router_answering_the_same_endpoint(loop):
    lane, _ = trick_pairs.lane_tricks(loop)
    mine, plain = lane.with_(1)(), lane.without(1)()
    assert mine[0] == plain[0] == 200
    # The same reply, bar its id, clock and the request id: both ran the chat endpoint.
    assert lane.key(mine) == lane.key(plain)
    assert any(name == b"x-request-id" for name, _ in mine[1])


def test_only_the_plain_side_of_the_lane_goes_through_the_router(loop):
    raw = request_body(1)
    head = trick_pairs.client_headers(raw)
    app = create_app()
    lane = trick_pairs._scope("/v1/chat/completions", "", head)
    router = trick_pairs._scope("/v1/chat/completions", trick_pairs.ROUTER_ROOT, head)
    for scope in (lane, router):
        assert loop.run_until_complete(trick_pairs.post(app, scope, raw))[0] == 200
    assert "endpoint" not in lane  # the router records the endpoint it chose in the scope
    assert router["endpoint"] is chat_completions


def test_speed_tricks(benchmark, tricks):
    """The figures for results/bench.md: each trick's time with and without it, and its share."""
    rounds = 3 if benchmark.disabled else 300
    rows = benchmark.pedantic(lambda: savings(tricks, rounds=rounds, batch_s=0.0005), rounds=1, iterations=1)
    benchmark.extra_info["speed tricks"] = [asdict(r) for r in rows]
    assert {(r.trick, r.turn) for r in rows} == {(t.name, t.turn) for t in tricks}
    assert all(r.with_us > 0 and r.without_us > 0 for r in rows)
    lanes = {r.turn for r in rows if r.trick == LANE}
    assert all(r.share is None or r.turn in lanes for r in rows)


@pytest.mark.parametrize(
    ("name", "module", "attr"),
    [
        ("tool-choice rule skipped for tools offered, auto", steps, "scripted_reply"),
        ("absent optional fields not looked up", chat, "chat_request"),
        ("attempt read only for a fault or the log", faults, "delay_or_fault"),
        ("ids from getrandbits", completions, "getrandbits"),
        ("ids from getrandbits", headers, "getrandbits"),
        ("request metrics kept as plain numbers", RequestSeries, "record"),
        ("the chat lane's common case written in", chat, "answer"),
        ("app state read from its dict", steps, "config_of"),
        ("brackets of a remembered transcript not counted", validation, "check_depth"),
        ("bytes searched with find", transcript, "tools_key"),
        ("remembered transcript not searched for escapes", validation, "refuse_lone_surrogates"),
        ("usage written by an f-string", chat, "_usage"),
    ],
)
def test_a_shortcut_is_timed_in_the_mocks_own_code_not_in_a_copy_of_its_test(
    tricks, monkeypatch, name, module, attr
):
    # A side that repeats the mock's test instead of calling the code holding it keeps timing
    # the shortcut after the mock drops it: the row would go on saying it earns its lines.
    def taken_away(*args, **kwargs):
        raise LookupError(f"{module.__name__}.{attr} ran")

    trick = next(t for t in tricks if t.name == name)
    monkeypatch.setattr(module, attr, taken_away)
    with pytest.raises(LookupError, match=attr):
        trick.with_(1)()
