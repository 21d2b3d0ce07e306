"""Beyond the chapter: its tool-error finding with the error arriving from an MCP server.

Experiment 4 again — `recover` × {fatal, generic, descriptive} — with the chapter's tools behind
the mock's MCP server, the missing file reported three ways (`mcp_channel`): an `isError`
result, a JSON-RPC error, or a dropped connection. Every run's turns, tokens, cost and answer are
predicted first, from the chapter rerun with local tools and the scenario's rule, then measured.
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
from experiments.chapter.tool_errors import POLICIES, recover
from experiments.lab.charts import CHAPTER, LIMIT, OURS, figure
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, ErrorWording, Run, run_scenario, summary

NAME = "mcp_tool_errors"
TITLE = ("Beyond · Tool errors over MCP: `recover` × {fatal, generic, descriptive} × "
         "{isError, JSON-RPC error, dropped}")
RECOVERS = "Call list_files"
"""The `recover` scenario's rule: it goes on to list the files only if a tool result says this."""
Key = tuple[Channel, ErrorWording]


@dataclass(frozen=True, kw_only=True)
class Measured:
    local: dict[str, Run]
    """The chapter rerun with its local tools, by policy: the base of every prediction."""
    predicted: dict[Key, Predicted]
    """Made before the MCP runs started."""
    runs: dict[Key, Run]
    seen: dict[Channel, int]
    """The `tools/call`s each channel's server journalled."""

    def answered(self, channel: Channel) -> list[str]:
        return [p for p in POLICIES if "errors.log" in (self.runs[channel, p].state.answer or "")]


def _prediction(local: dict[str, Run], channel: Channel, policy: ErrorWording, missing: str) -> Predicted:
    base = local[policy]
    if policy == "fatal":
        return predict(base, "", "")  # stops at the first failure, whatever it says
    new = told(policy, LOST if channel == "dropped" else missing)
    if policy == "descriptive" and RECOVERS not in new:
        base = local["generic"]  # told nothing it can act on, the model gives up as after "something failed"
    old = next(m["content"] for m in base.state.messages if m.get("role") == "tool")
    return predict(base, old, new)


async def _over_mcp(mock: McpMock, channel: Channel, policy: ErrorWording) -> Run:
    async with mcp_tools(mock.url(channel)) as tools:
        return await run_scenario(mock.env, "recover", run_id=f"mcp-{channel}-{policy}", errors=policy,
                                  max_turns=20, tools=tools)


async def measure(env: Env, *, rpc_message: str | None = None) -> Measured:
    """`rpc_message`: what JSON-RPC errors say instead of the tool's sentence (breaks the finding)."""
    async with mcp_mock(env, NAME, rpc_message) as mock:
        local_runs = await asyncio.gather(*(recover(mock.env, p, f"mcp-local-{p}") for p in POLICIES))
        local = dict(zip(POLICIES, local_runs, strict=True))
        missing = next(m["content"] for m in local["descriptive"].state.messages
                       if m.get("role") == "tool").removeprefix("Error: ")
        keys = [(c, p) for c in CHANNELS for p in POLICIES]
        predicted = {k: _prediction(local, *k, missing) for k in keys}
        runs = await asyncio.gather(*(_over_mcp(mock, *k) for k in keys))
        seen = {c: sum([await asyncio.to_thread(mock.calls_seen, c, t) for t in ("list_files", "read_file")])
                for c in CHANNELS}
    return Measured(local=local, predicted=predicted, runs=dict(zip(keys, runs, strict=True)), seen=seen)


def table(m: Measured) -> Table:
    rows = []
    for (channel, policy), r in m.runs.items():
        p, base = m.predicted[channel, policy], m.runs[channel, "fatal"].state.cost_usd
        told_model = next((x["content"] for x in r.state.messages if x.get("role") == "tool"), "")
        rows.append({
            "channel": channel, "policy": policy, **summary(f"recover over MCP, {channel}, {policy}", r),
            "x_first_row": round(r.state.cost_usd / base, 2),
            "model_was_told": told_model or f"(run stopped: {r.state.error})",
            "answer": r.state.answer or "",
            "predicted": f"turns={p.turns} in={p.input} out={p.output} cost={usd(float(p.cost_micro) / 1e6)}",
            "as_predicted": matches(r, p),
            "local_tools": usd(m.local[policy].state.cost_usd),
        })
    return Table(rows=rows)


def checks(m: Measured) -> dict[str, bool]:
    return {
        "every run came out as predicted before it ran (turns, tokens, micro-dollars, answer)": all(
            matches(r, m.predicted[k]) for k, r in m.runs.items()),
        "isError results and JSON-RPC errors: only the descriptive policy answers, as locally": all(
            m.answered(c) == ["descriptive"] for c in ("is_error", "rpc_error")),
        "a dropped connection: no policy answers": m.answered("dropped") == [],
        "fatal stops failed on every channel": all(
            m.runs[c, "fatal"].state.status == "failed" for c in CHANNELS),
        "each server saw every call the harness made": all(
            m.seen[c] == sum(m.runs[c, p].tool_runs for p in POLICIES) for c in CHANNELS),
    }


def prose(m: Measured) -> Prose:
    d = {c: m.runs[c, "descriptive"].state.cost_usd / m.runs[c, "fatal"].state.cost_usd for c in CHANNELS}
    dropped = m.runs["dropped", "descriptive"].state
    local = m.local["descriptive"].state.cost_usd / m.local["fatal"].state.cost_usd
    return Prose(
        finding=(
            "Over MCP, an `isError` result and a JSON-RPC error that carry the tool's sentence change "
            f"nothing: only the descriptive policy answers, at {d['is_error']:.1f}× the fatal row "
            f"(local tools: {local:.1f}×); a dropped connection leaves it nothing to pass on — no policy "
            f"answers, and the descriptive row pays {usd(dropped.cost_usd)} to be told “{LOST}”. All nine "
            "runs cost what the arithmetic predicted before they ran, to the micro-dollar."
        ),
        ours=f"only descriptive answers over isError and JSON-RPC ({d['rpc_error']:.1f}×); none over a drop",
        chapter="only descriptive answers (local tools)",
        explained=(
            "an MCP channel changes the cost only through the words the model is told: the same sentence "
            "is the same tokens; a dropped answer's sentence lacks “Call list_files”, so the descriptive "
            "run takes the generic run's two turns, priced with its own tool message"
        ),
        notes=[
            "The MCP server is the mock's own (`/mcp/mcp_<channel>`), scripted from the chapter's tools over "
            "a fresh sandbox: the same four definitions, listing, file and error sentences; the model is the "
            "built-in `recover`. The harness reaches the tools through the official `mcp` client and a "
            "plain adapter: `isError`, a JSON-RPC error and a lost answer each become an exception with "
            "its own sentence, worded by the run's policy.",
            "Predicted: each run is its local-tools counterpart (the generic one for a descriptive run told "
            "nothing it can act on), with the failing tool message's `o200k` tokens swapped for this "
            "channel's — the count is additive per message, so the prediction is exact.",
        ],
    )


def chart(m: Measured):
    """Three groups (the policies), a bar per channel in each: the cost, and whether it answered."""
    fig, ax = figure("Cost of one tool failure over MCP, by error policy and channel (`recover`)",
                     "error policy", "cost (USD)")
    colors = {"is_error": OURS, "rpc_error": CHAPTER, "dropped": LIMIT}
    width = 0.27
    for i, channel in enumerate(CHANNELS):
        runs = [m.runs[channel, p] for p in POLICIES]
        drawn = ax.bar([x + (i - 1) * width for x in range(len(POLICIES))], [r.state.cost_usd for r in runs],
                       width, color=colors[channel], label=channel)
        ax.bar_label(drawn, ["answers" if "errors.log" in (r.state.answer or "") else "" for r in runs],
                     fontsize=7)
    ax.set_xticks(range(len(POLICIES)), POLICIES)
    ax.legend(title="the error arrives as")
    ax.margins(y=0.2)
    return fig
