"""One signal reaches the HTTP call, every tool and every sub-agent."""

import asyncio
import threading
import time

from harness import Cancel, MemoryTrace, ModelClient, OpenAIChat, new_run, run
from harness.chapter import ListFiles, ReadFile, Research, ScanArchive
from harness.state import CancelledBy


def _slow(drive, *, seconds=1.2, stop_at=0.3, **options):
    """Run `slow`, press Stop at `stop_at` s; return (state, seconds from Stop to return, labels)."""
    cancel, labels, stopped_at = Cancel(), [], []
    original = cancel.set

    def press(reason):
        stopped_at.append(time.monotonic())
        original(reason)

    async def stop_later():
        await asyncio.sleep(stop_at)
        press("user pressed Stop")

    class Timed(ScanArchive):
        async def run(self, args, ctx):
            asyncio.get_running_loop().create_task(stop_later())
            return await super().run(args, ctx)

    s = drive("slow", tools=[Timed(seconds=seconds)], cancel=cancel,
              on_progress=lambda p: labels.append(p.label), **options)
    return s, time.monotonic() - stopped_at[0], labels


def test_cancel_stops_scan_archive_at_once(drive):
    """Stop at 0.3 s of a 1.2 s scan (a step every 0.2 s): the tool never reports a second step.

    How fast it stops is a benchmark's business (tests/benchmarks), not an assertion here."""
    s, _, labels = _slow(drive)
    assert (s.status, s.interruption) == ("interrupted", CancelledBy(reason="user pressed Stop"))
    assert labels == ["scanned 200 of 1200 files"]
    assert s.tool_runs == [] and s.turns == 1  # the call stays pending: resumable
    resumed = drive("slow", state=s, tools=[ScanArchive(seconds=0.06)])
    assert resumed.status == "completed" and resumed.turns == 2
    assert resumed.answer.startswith("The archive scan says: scanned 1200 files")


def test_a_signal_passed_only_to_http_waits_for_the_whole_tool(drive):
    s, _, labels = _slow(drive, seconds=0.6, stop_at=0.1, deaf_tools=True)
    assert len(labels) == 6  # the tool never saw Stop and did all its work
    assert s.status == "interrupted" and len(s.tool_runs) == 1


def test_one_stop_cancels_the_sub_agent_tree(mock_url, sandbox):
    cancel, trace = Cancel(), MemoryTrace()

    class StopWhenTheChildStarts(MemoryTrace):
        def emit(self, event):
            trace.emit(event)
            if event["type"] == "turn" and event["runId"].endswith(".c1"):
                cancel.set("user pressed Stop")  # the parent's signal, pressed inside the child

    async def main():
        async with ModelClient(mock_url) as c:
            child = OpenAIChat("plan", client=c)
            research = Research(model=child, tools=[ListFiles(sandbox), ReadFile(sandbox)])
            return await run(new_run("q"), model=OpenAIChat("research", client=c), tools=[research],
                             cancel=cancel, trace=StopWhenTheChildStarts())

    s = asyncio.run(main())
    assert (s.status, s.interruption.type, s.turns) == ("interrupted", "cancelled", 1)
    stopped = {e["runId"]: e["status"] for e in trace.of_type("run_stopped")}
    assert stopped == {s.run_id: "interrupted", f"{s.run_id}.c1": "interrupted"}  # child and parent
    assert [e["turn"] for e in trace.of_type("turn") if e["runId"] != s.run_id] == [1]  # the child stopped
    assert s.tool_runs == [] and s.tool_cost_usd > 0  # nothing ran to the end, yet the child's turn is paid


def test_cancel_from_another_thread_wakes_the_run(drive):
    cancel = Cancel()
    timer = threading.Timer(0.2, cancel.set, args=("stopped from a thread",))
    timer.start()
    labels = []
    s = drive("slow", tools=[ScanArchive(seconds=5)], cancel=cancel, on_progress=lambda p: labels.append(p))
    timer.join()
    assert s.interruption == CancelledBy(reason="stopped from a thread")
    assert labels == [] and s.tool_runs == []  # woken mid-sleep, before the scan's first 0.8 s step


def test_cancel_before_a_model_call_costs_nothing(drive):
    cancel = Cancel()
    cancel.set("not today")
    s = drive("plan", cancel=cancel)
    assert (s.status, s.turns, s.cost_usd) == ("interrupted", 0, 0.0)
    assert s.interruption == CancelledBy(reason="not today")
