"""Which call a tool result answers, when the result may carry no call id (Gemini, Ollama)."""

from __future__ import annotations

import time

import pytest

from mockprovider.errors import APIError
from mockprovider.reading.pairing import Calls


def _calls(*pairs: tuple[str, str]) -> Calls:
    calls = Calls(result="result", call="call")
    for call_id, name in pairs:
        calls.add(call_id, name)
    return calls


def test_a_result_answers_its_id_else_the_earliest_unanswered_call_of_its_name_else_the_earliest():
    calls = _calls(("a", "f"), ("b", "g"), ("c", "f"), ("d", "g"))
    assert calls.answer("c", None, "r0") == "c"
    assert calls.answer(None, "f", "r1") == "a"
    assert calls.answer(None, None, "r2") == "b"
    assert calls.answer(None, "g", "r3") == "d"
    with pytest.raises(APIError, match="'r4'"):
        calls.answer(None, "f", "r4")


def test_an_id_given_twice_is_answered_once_for_both_calls():
    calls = _calls(("a", "f"), ("a", "g"), ("b", "f"))
    assert calls.answer("a", None, "r0") == "a"
    assert calls.answer(None, None, "r1") == "b"
    with pytest.raises(APIError):
        calls.answer(None, "g", "r2")


def test_a_result_for_an_id_no_call_has_is_a_400_naming_it():
    with pytest.raises(APIError, match="'zz'") as caught:
        _calls(("a", "f")).answer("zz", None, "contents[2]")
    assert caught.value.status == 400 and caught.value.param == "contents[2]"


class _Counted(str):
    """A string that counts how often it is compared: the work pairing does."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        _Counted.compared += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize("by", ["id", "name"])
def test_pairing_n_results_does_work_linear_in_n(by):
    # A body under the size cap holds thousands of calls; pairing each result by scanning the
    # unanswered ones made one such request hold the event loop for seconds.
    n = 3000
    calls = Calls(result="result", call="call")
    for k in range(n):
        calls.add(_Counted(f"id{k}"), _Counted(f"f{k}"))
    _Counted.compared = 0
    for k in reversed(range(n)):  # the last call first: the longest scan
        if by == "id":
            calls.answer(_Counted(f"id{k}"), None, "r")
        else:
            calls.answer(None, _Counted(f"f{k}"), "r")
    assert _Counted.compared <= 10 * n


def _answering_seconds(n: int, *, by_id: bool) -> float:
    """CPU time to pair `n` calls that share one id with their `n` results (by id, or by name)."""
    calls = Calls(result="functionResponse", call="functionCall part")
    started = time.process_time()
    for _ in range(n):
        calls.add("same", "read_file")
    for i in range(n):
        calls.answer("same" if by_id else None, "read_file", f"r[{i}]")
    return time.process_time() - started


@pytest.mark.slow
@pytest.mark.parametrize("by_id", [True, False], ids=["by id", "by name"])
def test_calls_sharing_one_id_are_answered_in_linear_time(by_id):
    # A client may send one id for every call; each answer still costs the same (linear fields
    # measure about ten times at ten times the calls, quadratic ones a hundred).
    small, large = _answering_seconds(10_000, by_id=by_id), _answering_seconds(100_000, by_id=by_id)
    assert large < 40 * small, f"{small:.3f} s at 10,000 calls, {large:.3f} s at 100,000"
