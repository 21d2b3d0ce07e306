"""`results/peers.md`, `.csv` and `.png` from the measured tables: one table per exit, a finding each."""

from __future__ import annotations

import io
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from experiments.lab.charts import OURS, STYLE, save_png
from experiments.lab.report import markdown_table
from experiments.peers import NAME, TITLE
from experiments.peers.measure import BUDGET_USD, CAP, OUTSIDE_CAP, STOP_AT_S, peers

Rows = list[dict[str, Any]]
HEADINGS = {
    "turn_cap": f"Turn cap: `runaway`, cap {CAP} (every reply asks for one more tool call)",
    "tool_errors": "Tool errors: `recover` (the first read raises FileNotFoundError)",
    "budget": f"Budget: ${BUDGET_USD} on `runaway` (outside cap: {OUTSIDE_CAP} requests)",
    "approval": "Approval: `destructive`, stop, then approve in a new process (and resume once more)",
    "cancellation": f"Cancellation: the lab presses Stop {STOP_AT_S} s after the run starts, during "
                    "`slow`'s 3 s tool",
    "overhead": "Overhead per turn: client time minus the mock's own time, per request, as a ratio to ours",
    "memory": "Memory: peak RSS of a fresh process that imports one peer and runs `plan`",
}


def versions() -> Rows:
    return [{"framework": p.NAME, "package": p.PACKAGE, "version": version(p.PACKAGE)} for p in peers()]


def _names(rows: Rows, keep: Callable[[dict[str, Any]], bool]) -> str:
    return ", ".join(dict.fromkeys(r["framework"] for r in rows if keep(r))) or "none"


def _steps(rows: Rows, steps: int) -> str:
    row = next((r for r in rows if r["setting"] == f"recursion_limit={steps}"), None)
    return "not measured" if row is None else f"{row['requests']} requests, {row['caller gets']}"


def _turn_cap(rows: Rows) -> str:
    main = [r for r in rows if r["setting"] != f"recursion_limit={2 * CAP - 1}"
            and r["setting"] != f"recursion_limit={2 * CAP + 1}"]
    counts = ", ".join(sorted({str(r["requests"]) for r in main}))
    fates = "; ".join(f"{fate} in {_names(main, lambda r, f=fate: r['call of the last reply'] == f)}"
                      for fate in dict.fromkeys(r["call of the last reply"] for r in main))
    return (f"At a cap of {CAP} every peer makes {counts} requests; what differs is the call the "
            f"{CAP}th reply asks for: {fates}. LangGraph's cap is `recursion_limit` in graph steps, "
            f"two per turn (the model node, then the tools node), so {CAP} turns is {2 * CAP}: its "
            f"prebuilt agent sees fewer than 2 steps left after the {CAP}th model call and answers "
            "\"Sorry, need more steps\" instead of running the call. One step less "
            f"({2 * CAP - 1}): {_steps(rows, 2 * CAP - 1)}; one more ({2 * CAP + 1}): "
            f"{_steps(rows, 2 * CAP + 1)}.")


def _tool_errors(rows: Rows) -> str:
    frameworks = [r for r in rows if not r["setting"].startswith("contrast")]
    default = [r for r in frameworks if r["setting"] == "default"]
    silent = _names(default, lambda r: r["text sent back"].startswith("(nothing"))
    vague = _names(default, lambda r: not r["recovers"] and not r["text sent back"].startswith("(nothing"))
    fixed = _names(frameworks, lambda r: r["setting"] != "default" and r["recovers"])
    contrast = [r for r in rows if r["setting"].startswith("contrast")]
    tail = "".join(f" The contrast row ({r['framework']}, {r['setting'].split(': ', 1)[-1]}) "
                   f"{'recovers' if r['recovers'] else 'does not recover'}, as the chapter predicts for a "
                   "sentence that does not say what failed." for r in contrast)
    return (f"By default only {_names(default, lambda r: r['recovers'])} recovers: {silent} send nothing "
            f"back and raise, {vague} sends a sentence that does not say what failed. With its documented "
            f"setting the run recovers in {fixed}, each with its own wording.{tail}")


def _budget(rows: Rows) -> str:
    def label(r: dict[str, Any]) -> str:
        return f"{r['framework']} {r['setting']} ({r['requests']} requests, ${r['spent']:.4f})"

    near = [label(r) for r in rows if r["spent"] < 2 * BUDGET_USD]
    ran = [label(r) for r in rows if r["spent"] >= 2 * BUDGET_USD]
    warned = _names(rows, lambda r: r["warnings"] != "none")
    return (f"Stopped near ${BUDGET_USD}: {'; '.join(near) or 'none'}. Ran on to the outside cap of "
            f"{OUTSIDE_CAP} requests: {'; '.join(ran) or 'none'}. Warned: {warned}.")


def _approval(rows: Rows) -> str:
    ok = _names(rows, lambda r: r["deleted before approval"] == 0 and r["delete_file runs"] == 1
                and not r["access.log still there after approval"])
    def second(r: dict[str, Any]) -> str:
        ran = r["delete_file runs after that"] > r["delete_file runs"]
        return (f"{r['framework']} {r['same state resumed again'].split(':')[0]} and delete_file "
                f"{'ran again' if ran else 'did not run'}")

    again = "; ".join(second(r) for r in rows)
    return ("The destructive call stops, survives a new process, runs exactly once after approval and "
            f"access.log is gone from the sandbox in: {ok}. Resuming the same saved state a second "
            f"time: {again}.")


def _cancellation(rows: Rows) -> str:
    parts = [f"{r['framework']} {r['Stop to end ms']} ms" for r in rows]
    saw = _names(rows, lambda r: r["tool saw it"])
    return ("From the moment the lab pressed Stop (the same moment for every peer) to the end of the "
            "run: " + ", ".join(parts) + f"; the tool saw the cancellation in: {saw}.")


def _ratio_to_ours(rows: Rows, column: str, unit: str, group: str | None = None) -> str:
    """Per group: our figure, and the range of the frameworks' figures as multiples of it."""
    parts = []
    for key in dict.fromkeys(r[group] for r in rows) if group else [None]:
        subset = [r for r in rows if group is None or r[group] == key]
        ours = next(r[column] for r in subset if r["framework"].startswith("ours"))
        others = [r[column] / ours for r in subset if not r["framework"].startswith("ours") and ours]
        if others:
            parts.append((f"{key}: " if key else "") + f"ours {ours:g} {unit}, the frameworks "
                         f"{min(others):.1f}–{max(others):.1f}× that")
    return "; ".join(parts)


def _overhead(rows: Rows) -> str:
    parts = []
    for run in dict.fromkeys(r["run"] for r in rows):
        subset = [r for r in rows if r["run"] == run]
        ours = next(r for r in subset if r["framework"].startswith("ours"))
        others = ", ".join(f"{r['framework']} {r['× ours (median)']:g}× ({r['× ours (min–max)']})"
                           for r in subset if r is not ours)
        parts.append(f"{run}: ours {ours['overhead per turn ms']:g} ms; {others}")
    return "Overhead per turn as a multiple of ours, median over rounds (min–max) — " + "; ".join(parts) + "."


def _memory(rows: Rows) -> str:
    return ("Memory a process running `plan` needs for the agent code (import and run) — "
            f"{_ratio_to_ours(rows, 'its own MiB', 'MiB')}.")


FINDINGS: dict[str, Callable[[Rows], str]] = {
    "turn_cap": _turn_cap, "tool_errors": _tool_errors, "budget": _budget, "approval": _approval,
    "cancellation": _cancellation, "overhead": _overhead, "memory": _memory,
}
NOTES = {
    "budget": "Spend is the mock's billed tokens at the chapter's prices ($2/M in, $12/M out); "
              "overshoot is spend minus the budget. Where no budget setting exists the framework's own "
              "turn cap at the outside bound stopped the run. pydantic-ai prices a model from its bundled "
              "price table; the mock's model names have none, so `cost_limit` cannot fire, and 2.68 "
              "warns about that (`CostNotFoundWarning`) only when a run completes, so a runaway stopped "
              "by the outside cap ends without a warning (the warnings column is what the run emitted).",
    "turn_cap": "*Call of the last reply* is read from the tool log and the state the run ended in: "
                "*ran* when the tool ran as often as the model was asked, *pending, resumable* when the "
                "run ended with the call unanswered in a state it can resume from, *dropped* otherwise. "
                "The LangGraph rows one step either side of the documented setting are measured in the "
                "same run.",
    "cancellation": f"The lab owns the clock: t0 is the moment the run's coroutine starts, before any "
                    f"client, agent or graph is built, and Stop is pressed at t0 + {STOP_AT_S} s for "
                    "every peer the same way (an `asyncio.Event` each peer's module waits on, then calls "
                    "its own cancel API: `RunResultStreaming.cancel()`, `AgentRun.cancel()`, the task's "
                    "`cancel()` for LangGraph, `Cancel.set()` for ours). *Stop to end* is the run's end "
                    "minus the moment Stop was actually pressed; *tool saw it* is read from the tool log.",
    "overhead": "Every round runs each peer once, in turn, the order rotated by one each round; the "
                "ratio to ours is taken within a round, so the load of this shared machine, which "
                "drifts between rounds, divides out (the milliseconds drift with it; the ratios are the "
                "figures). One process, the mock on a loopback socket in a thread of the same process. "
                "Per-turn overhead is (wall time − time the mock spent on the requests) / requests. A "
                "run's fixed costs (each peer builds a new HTTP client per run; LangGraph also builds "
                "and compiles its graph with `create_react_agent` in every run) are spread over only 3 "
                "turns in `plan`; the `runaway` rows show what a turn itself costs, and how that grows "
                "with the transcript.",
    "memory": "VmHWM of a child process started as a script, with the lab's `experiments` package "
              "replaced by a bare one, so it imports only that peer's module and the lab's tools "
              "(`case.py`, `folder.py`: standard library only). The child reports what it imported "
              "and the lab refuses a row that carries pandas, matplotlib, or the harness for a "
              "framework. *Its own* is peak minus a bare interpreter (`python -c pass`), the same "
              "base for every row.",
}


def chart(tables: dict[str, Rows]) -> Any:
    plt.rcParams.update(STYLE)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    frame = pd.DataFrame(tables["overhead"])
    over = frame.pivot(index="run", columns="framework", values="× ours (median)")
    over = over.loc[list(dict.fromkeys(frame["run"])), [p.NAME for p in peers()]]
    colours = ["#ff7f0e", "#9467bd", "#2ca02c", OURS]
    over.plot.bar(ax=left, color=colours, rot=0)
    left.set_title("overhead per turn, × ours (median over rounds)")
    left.set_xlabel("")
    mem = pd.DataFrame(tables["memory"]).set_index("framework")["its own MiB"]
    right.bar(mem.index, mem.values, color=colours)
    right.set_title("memory it adds to a process running plan (MiB)")
    right.tick_params(axis="x", labelrotation=15)
    return fig


def _short(value: Any, limit: int = 100) -> Any:
    """Long exception messages cut for the table; the CSV keeps them whole."""
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    return value


def write(tables: dict[str, Rows], out: Path, *, command: str = "make peers") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv, md, png = (out / f"{NAME}.{ext}" for ext in ("csv", "md", "png"))
    flat = [{"exit": name} | row for name, rows in tables.items() for row in rows]
    buf = io.StringIO()
    pd.DataFrame(flat).to_csv(buf, index=False, lineterminator="\n")
    csv.write_text(buf.getvalue())
    save_png(chart(tables), png)
    parts = [f"# {TITLE}\n",
             "Every count (requests, tokens, the text sent back to the model) is read at the mock by a "
             "middleware that journals each request, never from a framework's own report. Each framework "
             "runs its own idiomatic code (`experiments/peers/`), with the same four tools over the same "
             "sandbox and the same system prompt as our harness.\n",
             markdown_table(versions())]
    for name, rows in tables.items():
        shown = [{k: _short(v) for k, v in r.items()} for r in rows]
        parts += [f"## {HEADINGS[name]}\n", f"**Finding.** {FINDINGS[name](rows)}\n", markdown_table(shown)]
        if name in NOTES:
            parts.append(NOTES[name] + "\n")
        if name == "memory":
            parts.append(f"![overhead and memory]({png.name})\n")
    parts.append(f"Raw rows: [{csv.name}]({csv.name}). Regenerate: `{command}`.\n")
    md.write_text("\n".join(parts))
    return [csv, md, png]
