"""The loop against the real mock over loopback: exits, ordering, errors, dedupe, resume."""

import asyncio

import httpx
import pytest

from harness import Limits, MemoryStore, MemoryTrace, ModelClient, Pricing, approve, new_run, pending, run
from harness.chapter import SYSTEM, CheckedAfterCall, ListFiles, ReadFile
from harness.loop import TRUNCATED
from harness.state import Approval, MaxBudget, MaxTurns
from harness.usage import Usage


def test_plan_completes_in_three_turns_with_the_quadratic_bill(drive):
    s = drive("plan")
    assert (s.status, s.turns, len(s.tool_runs)) == ("completed", 3, 2)
    assert s.answer == "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
    prompts = [u.prompt_tokens for u in s.turn_usage]
    assert prompts[0] < prompts[1] < prompts[2]  # each turn resends everything before it
    assert s.prompt_tokens == sum(prompts)
    assert s.cost_usd == pytest.approx(Pricing().cost(s.usage), abs=1e-12)
    runs = [(r.tool, r.args) for r in s.tool_runs]
    assert runs == [("list_files", {}), ("read_file", {"path": "errors.log"})]


def test_turn_cap_is_checked_before_the_call(drive, counting):
    wire = counting()
    s = drive("runaway", transport=wire, limits=Limits(max_turns=5))
    assert (s.status, s.interruption, s.turns) == ("max_turns_exceeded", MaxTurns(), 5)
    assert len(wire.bodies) == 5  # the sixth call was never made
    assert len(s.tool_runs) == 4  # the chapter's order: the cap is checked before the fifth call runs
    assert [c["id"] for c in pending(s)] == ["c4"]  # …which stays pending for a resume
    resumed = drive("runaway", state=s, transport=wire, limits=Limits(max_turns=6))
    assert (resumed.turns, len(resumed.tool_runs)) == (6, 5)  # the pending call ran first
    assert len(wire.bodies) == 6


@pytest.mark.parametrize("budget", [0.003, 0.01, 0.02])
def test_budget_is_checked_before_the_call_and_overshoots_by_at_most_one_turn(drive, budget, counting):
    wire = counting()
    s = drive("runaway", transport=wire, limits=Limits(max_turns=None, max_budget_usd=budget))
    assert (s.status, s.interruption) == ("budget_exceeded", MaxBudget())
    last = Pricing().cost(s.turn_usage[-1])
    assert s.cost_usd >= budget  # every row overshoots…
    assert s.cost_usd - last < budget  # …by at most the one turn that crossed it
    assert len(wire.bodies) == s.turns


def test_checking_after_the_call_overshoots_by_one_more_turn(drive):
    limits = Limits(max_turns=None, max_budget_usd=0.01)
    before = drive("runaway", limits=limits)
    after = drive("runaway", limits=CheckedAfterCall(max_turns=None, max_budget_usd=0.01))
    assert after.turns == before.turns + 1
    two_turns = sum(Pricing().cost(u) for u in after.turn_usage[-2:])
    assert after.cost_usd - two_turns < 0.01 <= after.cost_usd - Pricing().cost(after.turn_usage[-1])


def test_provider_401_fails_the_run_with_the_providers_message(drive, keyed_mock_url, monkeypatch):
    monkeypatch.delenv("LLM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = drive("plan", base_url=keyed_mock_url)
    assert s.status == "failed" and s.turns == 0 and s.cost_usd == 0
    assert "didn't provide an API key" in s.error
    with pytest.raises(ValueError, match="final"):
        drive("plan", state=s)


def test_unknown_model_fails_with_the_list_of_scenarios(drive):
    s = drive("plann")
    assert s.status == "failed" and "known scenarios: plan" in s.error


def test_429_then_success_is_retried_inside_one_turn(drive, counting):
    wire = counting()
    s = drive("plan", transport=wire, mock_options="fault=429@1x2+retry=20")
    assert (s.status, s.turns) == ("completed", 3)
    assert wire.attempt_headers == ["0", "0", "1", "2", "0"]


def test_tool_error_policies_on_recover(drive):
    fatal, generic, descriptive = (drive("recover", errors=p) for p in ("fatal", "generic", "descriptive"))
    assert fatal.status == "failed" and "no such file: timeout.log" in fatal.error
    assert generic.answer == "I could not read the file, so I do not know."
    assert descriptive.answer == "errors.log mentions a timeout."
    assert descriptive.cost_usd / fatal.cost_usd > 4  # only the descriptive row answers, at a price
    custom = drive("recover", errors=lambda e: f"Call list_files: {type(e).__name__}")
    assert custom.status == "completed" and custom.turns == 4


def test_a_permanent_error_stops_the_run_instead_of_burning_turns(drive):
    stopped = drive("denied", limits=Limits(max_turns=12))
    assert (stopped.status, stopped.turns, len(stopped.tool_runs)) == ("failed", 1, 1)
    assert stopped.error == "read_file: permission denied: private.key"
    burned = drive("denied", limits=Limits(max_turns=12), feed_back_permanent=True)
    assert (burned.status, burned.turns, len(burned.tool_runs)) == ("max_turns_exceeded", 12, 11)
    assert burned.answer is None and not any(r.ok for r in burned.tool_runs)
    assert burned.cost_usd > 10 * stopped.cost_usd


def test_read_file_refuses_the_key_even_as_root(sandbox):
    from harness import Cancel, ToolContext
    from harness.chapter import ReadFile

    ctx = ToolContext(run_id="r", call_id="c", cancel=Cancel(), progress=print)
    with pytest.raises(PermissionError, match="permission denied: private.key"):
        asyncio.run(ReadFile(sandbox).run({"path": "private.key"}, ctx))
    with pytest.raises(ValueError, match="plain file name"):
        asyncio.run(ReadFile(sandbox).run({"path": "../etc/passwd"}, ctx))


def test_dedupe_saves_a_tool_run_but_not_the_turn(drive):
    once, repeat = drive("once"), drive("repeat")
    deduped = drive("repeat", dedupe="read-only")
    assert repeat.cost_usd > 1.5 * once.cost_usd * 0.9  # the repeat costs a whole extra turn
    assert (len(repeat.tool_runs), len(deduped.tool_runs)) == (2, 1)
    assert deduped.turns == repeat.turns == 3
    assert deduped.cost_usd >= repeat.cost_usd  # dedupe recovers $0
    reused = [m for m in deduped.messages if m.get("tool_call_id") == "c2"]
    assert len(reused) == 1 and "reused" in reused[0]["content"]


def test_naive_cache_swallows_the_second_write_the_read_only_gate_runs_it(drive, sandbox):
    naive = drive("double_delete", dedupe="all", auto_approve={"delete_file"})
    assert not (sandbox / "access.log").exists()
    (sandbox / "access.log").write_text("again\n")
    gated = drive("double_delete", dedupe="read-only", auto_approve={"delete_file"})
    assert (naive.turns, len(naive.tool_runs)) == (3, 1)
    assert (gated.turns, len(gated.tool_runs)) == (3, 2)
    assert [r.args["path"] for r in gated.tool_runs] == ["access.log", "access.log"]
    assert [r.ok for r in gated.tool_runs] == [True, False]  # the second found nothing to delete


class _Crash(Exception):
    pass


def _crash_at(name: str, nth: int):
    seen = []

    def checkpoint(passed: str) -> None:
        seen.append(passed)
        if passed == name and seen.count(name) == nth:
            raise _Crash

    return checkpoint


def test_resume_runs_pending_calls_first_and_makes_no_extra_model_call(drive, counting, task):
    store = MemoryStore()
    # Saved with turn two's reply and its call pending: the turn cap stops right after that reply.
    state = new_run(task, system=SYSTEM, run_id="p1")
    drive("plan", state=state, store=store, limits=Limits(max_turns=2))
    saved = store.load("p1")
    assert (saved.turns, len(saved.tool_runs), len(saved.messages)) == (2, 1, 5)  # read_file pending
    wire = counting()
    resumed = drive("plan", state=saved, store=store, transport=wire)
    assert len(wire.bodies) == 1  # only the third turn; turn two was not paid twice
    straight = drive("plan")
    assert resumed.cost_usd == pytest.approx(straight.cost_usd, abs=1e-12)
    assert [r.tool for r in resumed.tool_runs] == ["list_files", "read_file"]


def test_a_read_only_turn_is_one_commit_so_a_crash_before_it_costs_that_turn_only(drive, counting, task):
    store = MemoryStore()
    with pytest.raises(_Crash):  # turn two's reply is in, its read_file not yet run: nothing of it saved
        state = new_run(task, system=SYSTEM, run_id="p1")
        drive("plan", state=state, store=store, checkpoint=_crash_at("after_model_reply", 2))
    assert store.saves == 1  # turn one: its reply and its list_files result together
    saved = store.load("p1")
    assert (saved.turns, len(saved.tool_runs), len(saved.messages)) == (1, 1, 4)
    assert pending(saved) == []
    wire = counting()
    resumed = drive("plan", state=saved, store=store, transport=wire)
    assert len(wire.bodies) == 2  # turn two asked again (the same request), then turn three
    assert len(wire.bodies[0]["messages"]) == 4
    straight = drive("plan")
    assert resumed.cost_usd == pytest.approx(straight.cost_usd, abs=1e-12)
    assert resumed.messages == straight.messages
    assert [r.tool for r in resumed.tool_runs] == ["list_files", "read_file"]


def test_each_turn_whose_calls_are_read_only_is_one_commit(drive):
    store, seen = MemoryStore(), []
    s = drive("runaway", store=store, limits=Limits(max_turns=5), checkpoint=seen.append)
    # Four turns saved with their results, and the fifth, capped, with its call pending.
    assert (s.turns, len(s.tool_runs), store.saves) == (5, 4, 5)
    assert seen[:4] == ["after_model_reply", "before_save", "after_tool_result", "after_model_reply"]


def test_a_write_is_saved_before_it_runs_and_its_result_at_once(drive):
    store, seen = MemoryStore(), []
    s = drive("double_delete", store=store, auto_approve={"delete_file"}, checkpoint=seen.append)
    assert (s.status, s.turns, store.saves) == ("completed", 3, 5)  # per delete: intent, result; the answer
    assert seen[:5] == ["after_model_reply", "before_save", "after_intent",
                        "before_save", "after_tool_result"]
    assert [row["state"] for row in store.ledger(s.run_id)] == ["done", "done"]


def test_unknown_tool_and_bad_arguments_are_errors_as_data(drive, tmp_path):
    s = drive("plan", tools=[ListFiles(tmp_path)])
    assert s.status == "completed"
    error = next(m for m in s.messages if m.get("tool_call_id") == "c2")["content"]
    assert error.startswith("Error: unknown tool 'read_file'; known: list_files")


def test_research_child_keeps_its_own_transcript_and_limits(drive):
    trace = MemoryTrace()
    s = drive("research", trace=trace)
    assert s.answer.startswith("Research summary: errors.log mentions a timeout")
    assert len(s.messages) == 5  # system, user, call, summary, answer: nothing the child read
    # the child's model calls are the parent's money too, and count against its budget
    own = Pricing().cost(sum(s.turn_usage, Usage()))
    assert s.tool_cost_usd > 0
    assert s.tool_cost_usd == pytest.approx(s.tool_runs[0].details["child_cost_usd"])
    assert s.cost_usd == pytest.approx(own + s.tool_cost_usd)
    assert not any("worker 3" in str(m.get("content")) for m in s.messages)
    details = s.tool_runs[0].details
    assert details["child_turns"] == 3 and details["child_status"] == "completed"
    assert {e["runId"] for e in trace.events} == {s.run_id, f"{s.run_id}.c1"}


def test_completed_reply_is_the_last_message(drive):
    s = drive("once", trace=(trace := MemoryTrace()))
    assert s.messages[-1] == {"role": "assistant", "content": s.answer}
    assert trace.events[-1]["type"] == "run_stopped"


def test_truncated_tool_calls_are_never_executed(drive):
    # $1 buys 49 reply tokens: turn 0's list_files call (23) fits, turn 1's read_file (29) is cut.
    s = drive("plan", limits=Limits(max_budget_usd=1.0, hard_budget=True), min_reply_tokens=1,
              pricing=Pricing(input_per_million=0.0, output_per_million=1e6 / 49))
    assert s.status == "budget_exceeded" and [r.tool for r in s.tool_runs] == ["list_files"]
    assert s.messages[-2]["tool_calls"][0]["function"]["name"] == "read_file"
    assert s.messages[-1]["content"] == TRUNCATED


def test_a_run_writes_no_file_its_caller_did_not_name(mock_url, task, tmp_path, monkeypatch):
    from harness import OpenAIChat

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.chdir(tmp_path)

    async def main():
        async with OpenAIChat("runaway", client=ModelClient(mock_url)) as model:
            try:
                # No list_files in the catalog; a request with no tools at all would get text.
                state = new_run(task, system=SYSTEM)
                return await run(state, model=model, tools=[ReadFile(tmp_path)], limits=Limits(max_turns=2))
            finally:
                await model.client.aclose()

    s = asyncio.run(main())
    assert s.turns == 2 and "unknown tool 'list_files'" in s.messages[3]["content"]
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["tmp"]


def _provider(*replies: dict):
    """A fake provider answering each model call with the next scripted assistant message."""
    queue = list(replies)

    def handler(request: httpx.Request) -> httpx.Response:
        message = queue.pop(0)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return httpx.Response(200, json={
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        })

    return httpx.MockTransport(handler)


def _asks(call_id: str, name: str, arguments: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def test_arguments_that_are_not_json_are_an_error_the_model_reads(drive):
    transport = _provider(_asks("c1", "read_file", '{"path": "errors.lo'),
                          {"role": "assistant", "content": "sorry"})
    s = drive("any", transport=transport, errors="descriptive")
    assert s.status == "completed" and s.tool_runs == []
    assert s.messages[3]["content"].startswith("Error: arguments for read_file are not a JSON object")


def test_an_approval_covers_one_call_even_when_the_provider_reuses_its_id(drive, sandbox):
    """Providers that number calls per reply (call_0, call_0, ...) must not ride one approval twice."""
    transport = _provider(_asks("call_0", "delete_file", '{"path": "access.log"}'),
                          _asks("call_0", "delete_file", '{"path": "errors.log"}'),
                          {"role": "assistant", "content": "done"})
    s = drive("any", transport=transport)
    assert isinstance(s.interruption, Approval) and s.interruption.args == {"path": "access.log"}
    approve(s)
    s = drive("any", state=s, transport=transport)
    assert isinstance(s.interruption, Approval) and s.interruption.args == {"path": "errors.log"}
    assert not (sandbox / "access.log").exists() and (sandbox / "errors.log").exists()


def test_dedupe_replays_the_right_result_when_ids_repeat(drive):
    transport = _provider(_asks("call_0", "list_files", "{}"),
                          _asks("call_0", "read_file", '{"path": "notes.txt"}'),
                          _asks("call_0", "read_file", '{"path": "notes.txt"}'),
                          {"role": "assistant", "content": "done"})
    s = drive("any", transport=transport, dedupe="read-only")
    assert [r.tool for r in s.tool_runs] == ["list_files", "read_file"]
    assert s.messages[-2]["content"].startswith("Remember to rotate your logs.")


def test_an_approval_is_spent_by_its_call_and_a_later_verdict_cannot_flip_it(drive, sandbox):
    """approve, then reject: the second verdict loses; the approved call runs once, and the provider
    asking again under the same id (and the same arguments) needs a person again."""
    from harness import reject
    from harness.approvals import DecisionLost

    transport = _provider(_asks("call_0", "delete_file", '{"path": "notes.txt"}'),
                          _asks("call_0", "delete_file", '{"path": "notes.txt"}'),
                          {"role": "assistant", "content": "done"})
    s = drive("any", transport=transport)
    approve(s)
    with pytest.raises(DecisionLost, match="already approved"):
        reject(s, reason="keep it")
    s = drive("any", state=s, transport=transport)
    assert isinstance(s.interruption, Approval) and s.interruption.call_id == "call_0"
    assert [r.tool for r in s.tool_runs] == ["delete_file"] and not (sandbox / "notes.txt").exists()
    assert s.approved == []


def test_the_naive_cache_still_guards_writes_with_intents_and_forgets_after_a_write(drive, sandbox):
    from harness import MemoryStore

    store = MemoryStore()
    transport = _provider(_asks("c1", "list_files", "{}"),
                          _asks("c2", "delete_file", '{"path": "notes.txt"}'),
                          _asks("c3", "list_files", "{}"), {"role": "assistant", "content": "done"})
    intents = []
    s = drive("any", transport=transport, dedupe="all", auto_approve={"delete_file"}, store=store,
              checkpoint=lambda name: intents.append(name))
    assert "after_intent" in intents  # the write still got its write-ahead intent
    listings = [m["content"] for m in s.messages if m.get("name") == "list_files"]
    assert "notes.txt" in listings[0] and "notes.txt" not in listings[1]  # not a stale reuse
