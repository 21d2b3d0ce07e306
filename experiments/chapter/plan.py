"""1. The well-behaved task: three turns, two tool runs, and the bill that grows each turn."""

from __future__ import annotations

from dataclasses import dataclass

import o200k
from experiments.chapter import figures
from experiments.lab.charts import CHAPTER, OURS, figure
from experiments.lab.report import Prose, Table, usd
from experiments.lab.runs import Env, Run, reply_tokens, request_tokens, run_scenario

NAME = "plan"
TITLE = "1 · `plan`, cap 20: three turns, and every turn resends everything"
CH = figures.PLAN


def chapter_call_tokens() -> list[int]:
    """The completion tokens the chapter's trace prints for its first two turns (23, 29)."""
    return [e["completion_tokens"] for e in figures.trace_events() if e["type"] == "turn"]


@dataclass(frozen=True, kw_only=True)
class Measured:
    run: Run
    prompts: list[int]
    """Prompt tokens per turn, as the provider billed them."""
    counted_prompts: list[int]
    """The same, counted on our side from the transcript and the tool definitions sent."""
    counted_replies: list[int]
    """Each reply counted on our side: tool-call JSON or text."""
    call_tokens: list[int]
    """The chapter's two tool-call replies, counted (23 and 29)."""
    predicted_output: int
    """23 + 29 + the answer's own count."""


async def measure(env: Env, *, hidden_note: str | None = None) -> Measured:
    """`hidden_note` is sent with every request but kept out of the transcript (broken)."""
    r = await run_scenario(env, "plan", run_id="plan", hidden_note=hidden_note)
    calls = [o200k.count(o200k.tool_calls_json(c.wire())) for c in (figures.LIST_FILES, figures.READ_ERRORS)]
    return Measured(
        run=r,
        prompts=[u.prompt_tokens for u in r.state.turn_usage],
        counted_prompts=request_tokens(r),
        counted_replies=reply_tokens(r),
        call_tokens=calls,
        predicted_output=sum(calls) + o200k.count(r.state.answer or ""),
    )


def table(m: Measured) -> Table:
    s = m.run.state
    rows = [
        {
            "turn": i + 1,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            # Turn 1 has no earlier prompt to grow from: its cell is empty, not the prompt itself.
            "growth": u.prompt_tokens - m.prompts[i - 1] if i else "",
            "chapter_prompt_tokens": CH.prompt_per_turn[i] if i < len(CH.prompt_per_turn) else "",
        }
        for i, u in enumerate(s.turn_usage)
    ]
    shown = [
        {"": "turns", "ours": s.turns, "chapter": CH.turns, "predicted for ours": ""},
        {"": "tool runs", "ours": len(s.tool_runs), "chapter": CH.tool_runs, "predicted for ours": ""},
        {"": "input tokens", "ours": s.prompt_tokens, "chapter": CH.input_tokens, "predicted for ours": ""},
        {
            "": "output tokens",
            "ours": s.completion_tokens,
            "chapter": CH.output_tokens,
            "predicted for ours": f"{m.predicted_output} ({' + '.join(map(str, m.call_tokens))} + "
            f"the answer's {m.counted_replies[-1]})",
        },
        {"": "cost", "ours": usd(s.cost_usd), "chapter": usd(CH.cost_usd), "predicted for ours": ""},
        {
            "": "per-turn prompt tokens",
            "ours": ", ".join(map(str, m.prompts)),
            "chapter": ", ".join(map(str, CH.prompt_per_turn)),
            "predicted for ours": ", ".join(map(str, m.counted_prompts)) + " (counted from the transcript)",
        },
        {"": "status", "ours": s.status, "chapter": CH.status, "predicted for ours": ""},
        {"": "answer", "ours": s.answer, "chapter": CH.answer, "predicted for ours": ""},
    ]
    return Table(rows=rows, shown=shown)


def checks(m: Measured) -> dict[str, bool]:
    s = m.run.state
    return {
        "three turns, two tool runs, completed with the chapter's answer": (
            s.turns,
            len(s.tool_runs),
            s.status,
        )
        == (CH.turns, CH.tool_runs, CH.status)
        and s.answer == CH.answer,
        "output = the two calls' JSON + the answer's own count": s.completion_tokens == m.predicted_output
        and [u.completion_tokens for u in s.turn_usage] == m.counted_replies,
        "each turn's prompt = our count of the transcript sent": m.prompts == m.counted_prompts,
        # Our counts and the mock's share o200k code; the chapter's printed trace does not.
        "the two calls' completion tokens = the chapter's printed trace counts": [
            u.completion_tokens for u in s.turn_usage[:2]
        ]
        == chapter_call_tokens(),
        "prompt tokens grow every turn": all(b > a for a, b in zip(m.prompts, m.prompts[1:], strict=False)),
    }


def prose(m: Measured) -> Prose:
    s = m.run.state
    per_turn = ", ".join(map(str, m.prompts))
    answer_out = m.counted_replies[-1]
    return Prose(
        finding=(
            f"The task finishes in {s.turns} turns and {len(s.tool_runs)} tool runs for "
            f"{usd(s.cost_usd)}, and each turn resends all before it: prompt tokens {per_turn} "
            f"(chapter {', '.join(map(str, CH.prompt_per_turn))})."
        ),
        ours=f"turns={s.turns} tools={len(s.tool_runs)} in={s.prompt_tokens} out={s.completion_tokens} "
        f"cost={usd(s.cost_usd)}; per turn {per_turn}",
        chapter=f"turns={CH.turns} tools={CH.tool_runs} in={CH.input_tokens} out={CH.output_tokens} "
        f"cost={usd(CH.cost_usd)}; per turn {', '.join(map(str, CH.prompt_per_turn))}",
        explained=(
            f"out: {' + '.join(map(str, m.call_tokens))} + {answer_out} = {m.predicted_output} (the "
            f"chapter's {CH.output_tokens} counts its answer as "
            f"{CH.output_tokens - sum(m.call_tokens)}); in: our first prompt is {m.prompts[0]} tokens, "
            f"the chapter's {CH.prompt_per_turn[0]} (see arithmetic)"
        ),
        notes=[
            f"Output tokens: the two tool-call replies are the chapter's own calls, "
            f"{' and '.join(map(str, m.call_tokens))} tokens "
            f"of compact `tool_calls` JSON, and the answer is the chapter's own sentence, {answer_out} "
            f"tokens: {m.predicted_output} in all. The chapter prints {CH.output_tokens} "
            f"({CH.output_tokens - m.predicted_output:+d}): its text reply counts "
            f"{CH.output_tokens - m.predicted_output:+d} beyond its text.",
            "Input tokens: each turn's prompt equals our own count of the request the harness sent "
            f"(transcript so far plus tool definitions): {', '.join(map(str, m.counted_prompts))}. Our "
            "system prompt and tool descriptions are our own, not tuned to the chapter's, so the first "
            "prompt differs; `arithmetic.md` fits both profiles.",
        ],
    )


def chart(m: Measured):
    fig, ax = figure("Prompt tokens per turn, `plan`", "turn", "prompt tokens")
    xs = list(range(1, len(m.prompts) + 1))
    ax.bar([x - 0.2 for x in xs], m.prompts, width=0.4, color=OURS, label="ours")
    ax.bar([x + 0.2 for x in xs[:3]], CH.prompt_per_turn, width=0.4, color=CHAPTER, label="chapter")
    ax.set_xticks(xs)
    ax.legend()
    return fig
