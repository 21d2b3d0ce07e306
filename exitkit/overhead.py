"""Overhead per turn and peak memory, as ratios to a bare `httpx` loop sending the same bodies.

Each agent run is followed at once by the bare loop replaying exactly the bodies that run sent,
so the two share the machine's load of that moment; the ratio is taken per pair and the median
over pairs is the figure. Per turn: (wall time − the mock's own time) / requests. Memory: the
peak RSS of a fresh process that runs `plan` with the adapter, over one that replays the same
bodies with bare `httpx`.
"""

from __future__ import annotations

import statistics
from typing import Any

from exitkit.contract import Declared
from exitkit.runner import Kit, Run
from exitkit.verdict import Result

RUNS = (("plan", 20, 2), ("runaway", 20, 2), ("runaway", 100, 1))
"""(scenario, turn cap, pairs)."""
FAST_RUNS = (("plan", 20, 1),)


def _per_turn_ms(run: Run) -> float:
    return (run.wall_s - run.mock_s) / max(len(run.requests), 1) * 1000


def _pairs(kit: Kit, who: Declared, scenario: str, cap: int, pairs: int) -> dict[str, Any]:
    ratios, agent_ms, raw_ms, requests = [], [], [], 0
    for _ in range(pairs):
        setup = kit.setup(scenario, max_turns=cap if who.has("max_turns") else None)
        run = kit.measure(who.spec, setup, guard=cap)
        bare = kit.replay(setup, [e.request for e in run.requests])
        agent_ms.append(_per_turn_ms(run))
        raw_ms.append(_per_turn_ms(bare))
        ratios.append(agent_ms[-1] / raw_ms[-1] if raw_ms[-1] > 0 else float("nan"))
        requests = len(run.requests)
    return {"run": f"{scenario}, cap {cap}", "requests": requests, "pairs": pairs,
            "per turn ms": round(statistics.median(agent_ms), 2),
            "bare httpx per turn ms": round(statistics.median(raw_ms), 3),
            "× bare httpx": round(statistics.median(ratios), 1),
            "× range": f"{min(ratios):.1f}–{max(ratios):.1f}"}


def _memory(kit: Kit, who: Declared) -> dict[str, Any]:
    setup = kit.setup("plan", max_turns=20 if who.has("max_turns") else None)
    with_agent = kit.child(who.spec, setup, "run", guard=20)
    bare = kit.replay(setup, [e.request for e in with_agent.requests])
    mib = round(with_agent.peak_rss_kib / 1024, 1), round(bare.peak_rss_kib / 1024, 1)
    return {"peak RSS MiB": mib[0], "bare httpx peak RSS MiB": mib[1],
            "RSS × bare httpx": round(mib[0] / mib[1], 1) if mib[1] else None,
            "plan answer": with_agent.last_text()}


def overhead(kit: Kit, who: Declared, *, fast: bool = False) -> Result:
    rows = [_pairs(kit, who, *spec) for spec in (FAST_RUNS if fast else RUNS)]
    memory = _memory(kit, who)
    longest = rows[-1]
    figures = {"per run": rows, **memory}
    measured = f"{longest['run'].partition(',')[0]}, {longest['requests']} requests"  # what ran, not the cap
    summary = (f"{longest['× bare httpx']:g}× bare httpx per turn ({measured}) · "
               f"RSS ×{memory['RSS × bare httpx']}")
    return Result(case="overhead", adapter=who.name, verdict="pass", summary=summary, figures=figures)
