"""Beyond the chapter: its permanent-error finding with the error arriving from an MCP server.

Experiment 5 again — `denied`, cap 12 — with the chapter's tools behind the mock's MCP server,
the permission error reported three ways (`mcp_channel`). Locally a `PermissionError` can stop
the run with its reason; over MCP nothing marks an error permanent, so every channel feeds it
back. Every run is predicted first, from the chapter rerun's fed-back run, then measured.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from experiments.beyond.mcp_channel import (
    CHANNELS,
    LOST,
    Channel,
    McpMock,
    Predicted,
    matches,
    mcp_mock,
    mcp_tools,
    predict,
    told,
)
from experiments.chapter import figures
from experiments.chapter.tool_errors import recover
from experiments.lab.charts import CHAPTER, LIMIT, OURS, cost_bars
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, Run, run_scenario, summary

NAME = "mcp_permanent_error"
TITLE = "Beyond · Permanent error over MCP: `denied`, cap 12, by how the error arrives"
CAP = figures.DENIED.turns


@dataclass(frozen=True, kw_only=True)
class Measured:
    floor: Run
    """Local tools, the permission error fed back as data: the base of every prediction."""
    stop: Run
    """Local tools, the `PermissionError` classed as permanent."""
    recovered: Run
    """`recover`, descriptive, local tools: the chapter's yardstick."""
    predicted: dict[Channel, Predicted]
    runs: dict[Channel, Run]
    seen: dict[Channel, int]


async def _over_mcp(mock: McpMock, channel: Channel) -> Run:
    async with mcp_tools(mock.url(channel)) as tools:
        return await run_scenario(mock.env, "denied", run_id=f"mcp-denied-{channel}", max_turns=CAP,
                                  tools=tools)


async def measure(env: Env, *, rpc_message: str | None = None) -> Measured:
    """`rpc_message`: what JSON-RPC errors say instead of the tool's sentence (breaks the finding)."""
    async with mcp_mock(env, NAME, rpc_message) as mock:
        floor, stop, recovered = await asyncio.gather(
            run_scenario(mock.env, "denied", run_id="mcp-denied-floor", max_turns=CAP,
                         feed_back_permanent=True),
            run_scenario(mock.env, "denied", run_id="mcp-denied-stop", max_turns=CAP),
            recover(mock.env, "descriptive", "mcp-denied-vs-recover"),
        )
        fed_back = next(m["content"] for m in floor.state.messages if m.get("role") == "tool")
        sentence = fed_back.removeprefix("Error: ")
        predicted = {c: predict(floor, fed_back, told("descriptive", LOST if c == "dropped" else sentence))
                     for c in CHANNELS}
        runs = await asyncio.gather(*(_over_mcp(mock, c) for c in CHANNELS))
        seen = {c: await asyncio.to_thread(mock.calls_seen, c, "read_file") for c in CHANNELS}
    return Measured(floor=floor, stop=stop, recovered=recovered, predicted=predicted,
                    runs=dict(zip(CHANNELS, runs, strict=True)), seen=seen)


def table(m: Measured) -> Table:
    def row(label: str, channel: str, r: Run, p: Predicted | None) -> dict:
        return {
            "channel": channel, **summary(label, r),
            "answer": r.state.answer or "", "error": r.state.error or "",
            "x_recovered_run": round(r.state.cost_usd / m.recovered.state.cost_usd, 2),
            "predicted": "" if p is None else
            f"turns={p.turns} in={p.input:,} out={p.output} cost={usd(float(p.cost_micro) / 1e6)}",
            "as_predicted": "" if p is None else matches(r, p),
        }

    return Table(rows=[
        row("denied, local tools, fed back as data (turn cap is the floor)", "local", m.floor, None),
        row("denied, local tools, permanent error stops the run", "local", m.stop, None),
        *(row(f"denied over MCP, {c}", c, m.runs[c], m.predicted[c]) for c in CHANNELS),
        row("recover, descriptive, local tools (the recovered run)", "local", m.recovered, None),
    ])


def checks(m: Measured) -> dict[str, bool]:
    return {
        "every MCP run came out as predicted before it ran (turns, tokens, micro-dollars, answer)": all(
            matches(m.runs[c], m.predicted[c]) for c in CHANNELS),
        "over MCP every channel burns to the cap: nothing marks the error permanent": all(
            (r.state.status, r.state.turns, r.tool_runs, r.state.answer or "")
            == ("max_turns_exceeded", CAP, CAP - 1, "") for r in m.runs.values()),
        "a local PermissionError stops the run after one turn, saying why": m.stop.state.status == "failed"
        and m.stop.state.turns == 1 and "private.key" in (m.stop.state.error or ""),
        "isError and JSON-RPC errors cost what the local fed-back run costs": all(
            m.runs[c].state.cost_usd == m.floor.state.cost_usd for c in ("is_error", "rpc_error")),
        "each server saw every call the harness made": all(
            m.seen[c] == m.runs[c].tool_runs for c in CHANNELS),
    }


def prose(m: Measured) -> Prose:
    f, dropped = m.runs["is_error"].state, m.runs["dropped"].state
    ratio = f.cost_usd / m.recovered.state.cost_usd
    return Prose(
        finding=(
            f"Over MCP nothing marks an error permanent: whether the permission error comes as an `isError` "
            f"result, a JSON-RPC error or a dropped connection, the run burns to the cap — {f.turns} turns, "
            f"{m.runs['is_error'].tool_runs} tool runs, {usd(f.cost_usd)} ({ratio:.1f}× the recovered run), "
            f"no answer, {usd(dropped.cost_usd)} when every answer is lost — where a local `PermissionError` "
            f"stops it after one turn for {usd(m.stop.state.cost_usd)}. Each run cost what was predicted."
        ),
        ours=f"every channel: {f.turns} turns, {usd(f.cost_usd)} ({ratio:.1f}×); local stop "
        f"{usd(m.stop.state.cost_usd)}",
        chapter=f"turns={figures.DENIED.turns} toolruns={figures.DENIED.tool_runs} "
        f"cost={usd(figures.DENIED.cost_usd)}; {figures.DENIED.vs_recovered}× (local tools)",
        explained=(
            "the same sentence is the same tokens, so isError and JSON-RPC errors cost exactly the local "
            "fed-back run; a lost answer's sentence is longer and is carried by every later prompt: "
            f"prompt k holds k − 1 of them, {CAP * (CAP - 1) // 2} in all at cap {CAP}"
        ),
        notes=[
            "A harness can stop on a permanent error only if the error says so: a local tool raises "
            "`PermissionError`; MCP's `isError` results and JSON-RPC errors carry only words, and this "
            "experiment's adapter (`experiments/beyond/mcp_channel.py`) does not guess from them.",
            "Predicted: the local fed-back run, with every tool message's `o200k` tokens swapped for the "
            "channel's (identical for isError and JSON-RPC errors, which carry the same sentence).",
        ],
    )


def chart(m: Measured):
    bars = [("local\nfed back", m.floor.state.cost_usd, CHAPTER, usd(m.floor.state.cost_usd)),
            ("local\npermanent stop", m.stop.state.cost_usd, OURS, usd(m.stop.state.cost_usd))]
    bars += [(f"MCP\n{c}", r.state.cost_usd, LIMIT, usd(r.state.cost_usd)) for c, r in m.runs.items()]
    return cost_bars(f"`denied` at cap {CAP}: local tools vs MCP channels", "run", bars)
