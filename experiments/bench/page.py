"""Turn pytest-benchmark's JSON into `results/bench.md`: medians and the ratios that matter.

`make bench` runs `tests/benchmarks` with `--benchmark-json=results/bench.json`, then
`python -m experiments.bench.page results/bench.json`. Ratios are taken between benchmarks of the
same run, since absolute times on a shared machine are noise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments import NAMES
from experiments.bench.overhead import FSYNC, TARGETS, Target, medians
from experiments.lab.paths import RESULTS
from experiments.lab.report import markdown_table

# (label, numerator, denominator, target) — names are pytest-benchmark's test names.
RATIOS = [
    (
        "mock at turn 100 / bare Starlette floor, loopback, the same body resent (a retry)",
        "test_mock_request_loopback[100]",
        "test_bare_starlette_loopback[100]",
        "—",
    ),
    (
        "mock at turn 1 / bare Starlette floor, loopback, the same body resent (a retry)",
        "test_mock_request_loopback[1]",
        "test_bare_starlette_loopback[1]",
        "—",
    ),
    (
        "mock request cost growth, turn 100 / turn 1 (in-process)",
        "test_mock_request_in_process[100]",
        "test_mock_request_in_process[1]",
        "—",
    ),
    (
        "mock request at turn 100, transcript memory and count caches emptied / warm (in-process)",
        "test_mock_request_in_process_uncached_turn_100",
        "test_mock_request_in_process[100]",
        "keep the cache if > 1",
    ),
    (
        "prompt-token count of 100 turns, uncached / cached",
        "test_prompt_tokens_turn_100_uncached",
        "test_prompt_tokens_turn_100_cached",
        "—",
    ),
]


# Per-turn ratios: (median / turns) of one benchmark over the same of another.
PER_TURN = [
    ("harness + MemoryStore, per turn at 100 turns / at 20 turns", "test_harness_runaway[memory-100]",
     "test_harness_runaway[memory-20]", "≤ 1.3"),
    ("harness + SQLiteStore, per turn at 100 turns / at 20 turns", "test_harness_runaway[sqlite-100]",
     "test_harness_runaway[sqlite-20]", "≤ 1.3"),
    ("harness + PostgresStore, per turn at 100 turns / at 20 turns", "test_harness_runaway[postgres-100]",
     "test_harness_runaway[postgres-20]", "≤ 1.3"),
    ("raw httpx loop, per turn at 100 turns / at 20 turns (the floor's own growth)",
     "test_raw_loop_runaway[100]", "test_raw_loop_runaway[20]", "—"),
    ("harness + MemoryStore / raw httpx loop, per turn at 100 turns (separate runs)",
     "test_harness_runaway[memory-100]", "test_raw_loop_runaway[100]", "—"),
    ("harness + SQLiteStore / raw httpx loop, per turn at 100 turns (separate runs)",
     "test_harness_runaway[sqlite-100]", "test_raw_loop_runaway[100]", "—"),
    ("harness + PostgresStore / raw httpx loop, per turn at 100 turns", "test_harness_runaway[postgres-100]",
     "test_raw_loop_runaway[100]", "—"),
]


def _interleaved(report: dict) -> list[dict]:
    """The harness's `TARGETS`, from `test_harness_vs_raw_loop_interleaved`: round by round against
    one mock, so a ratio does not depend on how the machine moved between two runs."""
    for b in report["benchmarks"]:
        info = b.get("extra_info") or {}
        if "per_turn_runs" in info:
            runs, rounds = info["per_turn_runs"], info.get("rounds")
            rows = [{"ratio": f"{t.name}, interleaved ({rounds} rounds)", "value": f"{t.value(runs):.2f}×",
                     "target": _target(t, runs)}
                    for t in TARGETS if t.numerator in runs and t.denominator in runs]
            if FSYNC in runs:
                rows.append({"ratio": "one fsync on this machine, in the same rounds (4 KiB appended to "
                                      "a file, then os.fsync: the mean of 50 a round, the rounds' median)",
                             "value": f"{medians(runs)[FSYNC] * 1e3:.2f} ms", "target": "—"})
            return rows
    return []


def _target(t: Target, runs: dict[str, list[float]]) -> str:
    if not t.plus_fsync:
        return f"≤ {t.target:g}"
    if FSYNC not in runs:
        return f"≤ {t.target:g} + one fsync per turn"
    allowance = t.allowance(runs)
    return f"≤ {t.target:g} + one fsync per turn ({allowance:.2f}×) = {t.target + allowance:.2f}"


def _per_turn(report: dict) -> dict[str, float]:
    return {b["name"]: b["stats"]["median"] / b["extra_info"]["turns"]
            for b in report["benchmarks"] if "turns" in (b.get("extra_info") or {})}


def _medians(report: dict) -> dict[str, float]:
    return {b["name"]: b["stats"]["median"] for b in report["benchmarks"]}


def time_experiments() -> float:
    """Seconds `python -m experiments` takes to rerun everything (into a scratch folder)."""
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "experiments", "--out", out], check=True, stdout=subprocess.DEVNULL
        )
        return time.perf_counter() - started


FLOOR_TARGETS = {1: 1.0, 100: 1.0}
FAST, PURE, OURS = "uvloop+httptools", "asyncio+h11", "uvloop+Http11"


def _floor_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "turn": r["turn"],
            "requests": r["samples"],
            "mock, median µs": f"{r['mock_us']:,.0f}",
            "floor, median µs": f"{r['floor_us']:,.0f}",
            "mock / floor (wall)": f"{r['ratio']:.3f}×",
            "mock / floor (CPU)": f"{r['cpu_ratio']:.3f}×",
            "target": f"≤ {FLOOR_TARGETS.get(r['turn'], float('nan')):.2f}×",
            "reply floor / floor": f"{r['reply_cost']:.3f}×",
            "mock / reply floor": f"{r['reply_ratio']:.3f}×",
        }
        for r in rows
    ]


def _stack_rows(rows: list[dict]) -> list[dict]:
    """One row per (turn, connections): requests/s of each stack per round, and their ratio."""
    shapes: dict[tuple[int, int], dict[str, list[dict]]] = {}
    for r in rows:
        shapes.setdefault((r["turn"], r["connections"]), {}).setdefault(r["server"], []).append(r)
    out = []
    for (turn, connections), by in sorted(shapes.items()):
        pure, fast, ours = by.get(PURE, []), by.get(FAST, []), by.get(OURS, [])
        cpu = [(p["server_cpu_us"], f["server_cpu_us"]) for p, f in zip(pure, fast, strict=False)]
        own = [(f["server_cpu_us"], o["server_cpu_us"]) for f, o in zip(fast, ours, strict=False)]
        out.append({
            "turn": turn,
            "connections": connections,
            **{f"{name} req/s": ", ".join(f"{r['requests_per_s']:,.0f}" for r in stack)
               for name, stack in ((PURE, pure), (FAST, fast), (OURS, ours))},
            "server CPU µs/request, pure → fast": ", ".join(
                f"{p:,.0f} → {f:,.0f} ({p / f:.2f}×)" for p, f in cpu if p and f
            ),
            f"server CPU µs/request, {FAST} → {OURS}": ", ".join(
                f"{f:,.0f} → {o:,.0f} ({f / o:.2f}×)" for f, o in own if f and o
            ),
        })
    return out


def _throughput_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "workers": r["workers"],
            "turn": r["turn"],
            "connections": r["connections"],
            "server": r["server"],
            "requests/s": f"{r['requests_per_s']:,.0f}",
            "server CPU µs/request": f"{r['server_cpu_us']:,.0f}" if r.get("server_cpu_us") else "—",
            "client CPU (cores)": f"{r['client_cpu_share']:.2f}",
            "errors": r["errors"],
        }
        for r in rows
    ]


def _with_without(r: dict) -> dict[str, str]:
    """The cells a speed trick's row and a harness lever's row share: both times and their ratio."""
    return {"with, µs": f"{r['with_us']:,.2f}", "without, µs": f"{r['without_us']:,.2f}",
            "without / with": f"{r['ratio']:.2f}×"}


def _trick_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "trick": r["trick"],
            "where it lives": f"`{r['where']}`",
            "request": f"turn {r['turn']}",
            **_with_without(r),
            "share of the request it saves": "—" if r["share"] is None else f"{r['share']:.1%}",
            "rounds": r["rounds"],
        }
        for r in rows
    ]


def _lever_rows(rows: list[dict]) -> list[dict]:
    return [
        {
            "lever": r["lever"],
            "where it lives": f"`{r['where']}`",
            **_with_without(r),
            "saved per turn, µs": f"{r['saved_per_turn_us']:,.1f}",
            "rounds": r["rounds"],
        }
        for r in rows
    ]


def _memory_rows(figures: dict) -> list[dict]:
    return [{"figure": k, "value": f"{v:,}"} for k, v in figures.items()]


SECTIONS = {
    "floor": (
        "Mock vs floor, the agent-loop case",
        "Each request is a new conversation at that turn whose previous turn the mock has answered; "
        "mock and floor (a bare Starlette endpoint parsing the same body and answering small JSON) are "
        "timed request by request, interleaved, one keep-alive httpx connection each; the ratio is the "
        "median of per-request ratios (CPU: client and server threads' CPU time, robust to a busy "
        "machine). The reply floor is the same endpoint answering the bytes and headers of a mock "
        "reply (the real API's: a request id, the processing time, six rate-limit headers, the usage "
        "details), so mock / floor splits into what sending that reply costs any endpoint (reply floor "
        "/ floor) and what producing it costs the mock (mock / reply floor). The floors are served as "
        "uvicorn serves any Starlette app, the mock as it serves itself (its JSON reply handed to its own "
        "request cycle whole and written in one write, `mockprovider/cycle.py`), so mock / reply floor "
        "counts that too.",
        _floor_rows,
    ),
    "server stacks": (
        "Server stacks on the same bodies",
        f"One worker, `{PURE}`, `{FAST}` (uvicorn's own protocols) and `{OURS}` (uvicorn's httptools "
        "protocol with the mock's request cycle, `mockprovider/protocol.py` and `cycle.py`: the chat "
        "reply's head and body in one write), alternated twice. Requests/s swing with the machine's "
        "load; the server's own CPU time per request (read from /proc, warm-up included) moves less, "
        "and is what decides. "
        f"`python -m mockprovider` serves with `{OURS}` (`--loop auto --http auto`): a row where it "
        f"costs more CPU per request than `{FAST}`, or `{FAST}` more than `{PURE}`, means that choice "
        "needs revisiting. These bursts swing on a busy machine; `experiments.bench.against` times "
        "two servers request by request, interleaved (see docs/benchmarks.md).",
        _stack_rows,
    ),
    "throughput": (
        "Throughput",
        "64 keep-alive connections from a lean asyncio client in its own process, 3 s after a 0.5 s "
        "warm-up, the same body resent (answered from the transcript memory like a retry). The client "
        "CPU column is the cores the client itself used: on a 2-core machine the client and the "
        "workers share the CPU, so 2 workers cannot double 1.",
        _throughput_rows,
    ),
    "speed tricks": (
        "Speed tricks: what each one saves",
        "Each trick of the mock timed against the plain code it replaces, on the same input with the "
        "same output (checked), in-process, round by round, interleaved; the ratio is the median of "
        "the per-round ratios (tests/benchmarks/test_speed_tricks.py, experiments/bench/trick_pairs.py). "
        "The share is what the trick saves on one request of that turn, as a part of the time the "
        "request would take in-process without it (the request's time: the `ChatLane` row's, the ASGI "
        "app called directly); — where the chat route's JSON reply does not use it (streams, errors "
        "and the router do). `make bench-check` fails if any ratio falls to about 1.",
        _trick_rows,
    ),
    "harness levers": (
        "Harness levers: what each one saves per turn",
        "Each lever of the harness's per-turn cost timed against the plain code it replaced, on the "
        "same input with the same output (checked), in-process, round by round, interleaved; the ratio "
        "is the median of the per-round ratios (tests/benchmarks/test_harness_levers.py, "
        "experiments/bench/harness_levers.py). A use is one model call, the rows one `runaway` turn "
        "adds to a run encoded for a save, or one save of a run growing by such a turn into "
        "PostgreSQL (the test server). "
        "`make bench-check` fails if an in-process lever's ratio falls to about 1.",
        _lever_rows,
    ),
    "memory soak": (
        "Memory under 10,000 distinct 1 MB prompts",
        "`python -m mockprovider` as its own process; the test process sends it ~1 MB prompts, each "
        "different from the others in its first characters, over a few keep-alive loopback connections. "
        "The server's RSS is read from /proc: the baseline after a warm-up, the peak (VmHWM) over the "
        "soak. The cap adds the transcript memory's budget, the requests in flight and room for the "
        "allocator (tests/benchmarks/test_memory_soak.py gives the reasoning).",
        _memory_rows,
    ),
}


def render(report: dict, *, experiments_s: float | None = None) -> str:
    medians = _medians(report)
    rows = [
        {
            "benchmark": b["name"],
            "median (µs)": f"{b['stats']['median'] * 1e6:,.1f}",
            "IQR (µs)": f"{b['stats']['iqr'] * 1e6:,.1f}",
            "rounds": b["stats"]["rounds"],
        }
        for b in sorted(report["benchmarks"], key=lambda b: b["name"])
    ]
    ratios = [
        {"ratio": label, "value": f"{medians[a] / medians[b]:.2f}×", "target": target}
        for label, a, b, target in RATIOS
        if a in medians and b in medians
    ]
    per_turn = _per_turn(report)
    ratios += [
        {"ratio": label, "value": f"{per_turn[a] / per_turn[b]:.2f}×", "target": target}
        for label, a, b, target in PER_TURN
        if a in per_turn and b in per_turn
    ]
    ratios += _interleaved(report)
    extra = {
        k: v for b in report["benchmarks"] for k, v in (b.get("extra_info") or {}).items()
        if k not in ("turns", "per_turn_runs", "rounds")
    }
    if experiments_s is not None:
        label = f"`python -m experiments`, all {len(NAMES)}, wall seconds (target < 60)"
        extra[label] = round(experiments_s, 1)
    parts = [
        "# Benchmarks\n",
        "Medians from one `make bench` run on this machine; compare ratios, not absolute times.\n",
        markdown_table(rows),
        "## Ratios\n",
        markdown_table(ratios),
    ]
    for key, (title, how, table) in SECTIONS.items():
        if key in extra:
            parts += [f"## {title}\n", how + "\n", markdown_table(table(extra.pop(key)))]
    if extra:
        parts += ["## Derived\n", markdown_table([{"figure": k, "value": v} for k, v in extra.items()])]
    machine = report.get("machine_info", {})
    cpu = machine.get("cpu", {})
    parts.append(
        f"Machine: {cpu.get('brand_raw', '?')}, {cpu.get('count', '?')} cores, {_python(machine)}. "
        "Raw: [bench.json](bench.json).\n"
    )
    return "\n".join(parts)


def _python(machine: dict) -> str:
    """The interpreter that ran the benchmarks: its version, build date and compiler. Two builds of
    one Python version (a distribution's, optimised with profiles, and one compiled without them)
    time the same code differently, so absolute times hold only for the build that made them;
    whether a build used profiles is not recorded where Python can read it, but the date tells
    two builds apart."""
    name = f"{machine.get('python_implementation', 'Python')} {machine.get('python_version', '?')}"
    build = machine.get("python_build") or []
    built = f"built {' '.join(str(build[1]).split())}" if len(build) > 1 else ""
    made = ", ".join(x for x in (built, machine.get("python_compiler", "")) if x)
    return f"{name} ({made})" if made else name


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    source = Path(args[0]) if args else RESULTS / "bench.json"
    report = json.loads(source.read_text())
    (RESULTS / "bench.md").write_text(render(report, experiments_s=time_experiments()))
    print(f"wrote {RESULTS / 'bench.md'}")


if __name__ == "__main__":
    main()
