"""One signal reaches the HTTP call, every tool and every sub-agent."""

import asyncio
import threading
import time

from harness import Cancel, ModelClient, RunOptions, new_run, run
from harness.catalog import ListFiles, ReadFile, Research, ScanArchive
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


def test_cancel_stops_scan_archive_within_50_ms(drive):
    s, gap, labels = _slow(drive)
    assert gap < 0.050, f"{gap * 1000:.1f} ms from Stop to return"
    assert (s.status, s.interruption) == ("interrupted", CancelledBy(reason="user pressed Stop"))
    assert labels == ["scanned 200 of 1200 files"]
    assert s.tool_runs == [] and s.turns == 1  # the call stays pending: resumable
    resumed = drive("slow", state=s, tools=[ScanArchive(seconds=0.06)])
    assert resumed.status == "completed" and resumed.turns == 2
    assert resumed.answer.startswith("The archive scan says: scanned 1200 files")


def test_a_signal_passed_only_to_http_waits_for_the_whole_tool(drive):
    s, gap, labels = _slow(drive, seconds=0.6, stop_at=0.1, signal_reaches_tools=False)
    assert gap > 0.4  # Stop waited for the tool to finish
    assert len(labels) == 6 and s.status == "interrupted" and len(s.tool_runs) == 1


def test_one_stop_cancels_the_sub_agent_tree(serve_mock, sandbox):
    with serve_mock(latency_ms=150) as url:

        async def main():
            cancel = Cancel()
            asyncio.get_running_loop().call_later(0.22, cancel.set, "user pressed Stop")
            opts = RunOptions(model="research", cancel=cancel, sandbox=sandbox)
            async with ModelClient(url) as c:
                return await run(new_run("q"), tools=[Research(), ListFiles(), ReadFile()], options=opts,
                                 client=c)

        t0 = time.monotonic()
        s = asyncio.run(main())
    assert time.monotonic() - t0 < 0.6
    assert (s.status, s.interruption.type, s.turns) == ("interrupted", "cancelled", 1)


def test_cancel_from_another_thread_wakes_the_run(drive):
    cancel = Cancel()
    timer = threading.Timer(0.2, cancel.set, args=("stopped from a thread",))
    timer.start()
    t0 = time.monotonic()
    s = drive("slow", tools=[ScanArchive(seconds=5)], cancel=cancel)
    timer.join()
    assert time.monotonic() - t0 < 1.0
    assert s.interruption == CancelledBy(reason="stopped from a thread")


def test_cancel_before_a_model_call_costs_nothing(drive):
    cancel = Cancel()
    cancel.set("not today")
    s = drive("plan", cancel=cancel)
    assert (s.status, s.turns, s.cost_usd) == ("interrupted", 0, 0.0)
    assert s.interruption == CancelledBy(reason="not today")
