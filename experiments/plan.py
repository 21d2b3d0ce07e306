"""1. The well-behaved task: three turns, two tool runs, and the bill that grows each turn."""

from __future__ import annotations

import o200k
from experiments.common import CHAPTER, OURS, Env, Outcome, figure, run_scenario, usd

NAME = "plan"
TITLE = "1 · `plan`, cap 20: three turns, and every turn resends everything"
CHAPTER_PER_TURN = (204, 269, 342)


async def measure(env: Env) -> Outcome:
    from harness import Limits

    r = await run_scenario(env, "plan", run_id="plan", limits=Limits(max_turns=20))
    s = r.state
    per_turn = [u.prompt_tokens for u in s.turn_usage]
    rows = [
        {
            "turn": i + 1,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "growth": u.prompt_tokens - (per_turn[i - 1] if i else 0),
            "chapter_prompt_tokens": CHAPTER_PER_TURN[i] if i < len(CHAPTER_PER_TURN) else "",
        }
        for i, u in enumerate(s.turn_usage)
    ]
    # What each turn added to the transcript, counted on our side with the same encoder.
    starts = [i for i, m in enumerate(s.messages) if m.get("role") == "assistant"]
    added = [
        sum(o200k.message_tokens(m) for m in s.messages[a:b])
        for a, b in zip(starts, starts[1:], strict=False)
    ]
    growth = [b - a for a, b in zip(per_turn, per_turn[1:], strict=False)]
    table = [
        {"": "turns", "ours": s.turns, "chapter": 3},
        {"": "tool runs", "ours": len(s.tool_runs), "chapter": 2},
        {"": "input tokens", "ours": s.prompt_tokens, "chapter": 815},
        {"": "output tokens", "ours": s.completion_tokens, "chapter": 70},
        {"": "cost", "ours": usd(s.cost_usd), "chapter": "$0.002470"},
        {
            "": "per-turn prompt tokens",
            "ours": ", ".join(map(str, per_turn)),
            "chapter": ", ".join(map(str, CHAPTER_PER_TURN)),
        },
        {"": "status", "ours": s.status, "chapter": "completed"},
        {"": "answer", "ours": s.answer, "chapter": "errors.log mentions a timeout: worker 7 …"},
    ]

    def chart():
        fig, ax = figure("Prompt tokens per turn, `plan`", "turn", "prompt tokens")
        xs = list(range(1, len(per_turn) + 1))
        ax.bar([x - 0.2 for x in xs], per_turn, width=0.4, color=OURS, label="ours")
        ax.bar([x + 0.2 for x in xs[:3]], CHAPTER_PER_TURN, width=0.4, color=CHAPTER, label="chapter")
        ax.set_xticks(xs)
        ax.legend()
        return fig

    return Outcome(
        rows=rows,
        table=table,
        finding=(
            f"The task finishes in {s.turns} turns and {len(s.tool_runs)} tool runs for "
            f"{usd(s.cost_usd)}, and each turn resends all before it: prompt tokens "
            f"{', '.join(map(str, per_turn))} (chapter 204, 269, 342)."
        ),
        ours=f"turns={s.turns} tools={len(s.tool_runs)} in={s.prompt_tokens} out={s.completion_tokens} "
        f"cost={usd(s.cost_usd)}; per turn {', '.join(map(str, per_turn))}",
        chapter="turns=3 tools=2 in=815 out=70 cost=$0.002470; per turn 204, 269, 342",
        notes=[
            f"Each turn's growth in prompt tokens ({', '.join(map(str, growth))}) equals the tokens "
            f"of what the previous turn appended ({', '.join(map(str, added))}): the bill is additive.",
            "Our absolute counts differ from the chapter's: its exact system prompt and tool "
            "descriptions are not published, and ours are not tuned to match.",
        ],
        chart=chart,
        checks={
            "three turns, two tool runs, completed": (s.turns, len(s.tool_runs), s.status)
            == (3, 2, "completed"),
            "prompt tokens grow every turn": all(b > a for a, b in zip(per_turn, per_turn[1:], strict=False)),
            "growth equals what each turn appended": growth == added,
        },
        data={"state": s},
    )
