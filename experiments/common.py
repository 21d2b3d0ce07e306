"""What every experiment shares: the mock server, the output folder, tables and chart style.

An experiment module exposes `NAME`, `TITLE` and `async def measure(env: Env) -> Outcome`.
`Outcome` holds the raw rows (the CSV), the table shown in Markdown (ours beside the
chapter's), the finding in one sentence, and optionally a chart. `write()` turns it into
`results/<name>.csv`, `.md` and `.png`; the token and cost experiments are pure arithmetic, so
a rerun with unchanged code leaves those files byte-identical.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness import (  # noqa: E402
    Cancel,
    Limits,
    MemoryTrace,
    ModelClient,
    OpenAIChat,
    Policy,
    Pricing,
    RunState,
    Store,
    Tool,
    chapter_tools,
    make_sandbox,
    new_run,
    run,
)
from harness.chapter import Knobs, Taught  # noqa: E402
from mockprovider.server import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"

# One palette for every chart: ours in blue, the chapter's in grey, limits in red.
OURS, CHAPTER, LIMIT, ACCENT = "#1f77b4", "#8c8c8c", "#d62728", "#2ca02c"
STYLE = {
    "figure.figsize": (7.0, 4.2),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "axes.titlesize": 11,
    "legend.frameon": False,
    "svg.hashsalt": "harness-lab",
}


@dataclass(frozen=True, kw_only=True)
class Env:
    """Where and how an experiment runs."""

    base_url: str
    """The mock's `/v1` URL (a real loopback socket)."""
    fast: bool = False
    """Smaller sweeps, for the test suite's quick pass; findings must still hold."""
    workdir: Path = field(default_factory=lambda: Path(os.environ.get("TMPDIR", "/tmp")))
    """Scratch space for sandboxes and saved runs."""
    client: ModelClient | None = None
    """One connection pool for every run (each run makes its own when None)."""


@dataclass(kw_only=True)
class Outcome:
    rows: list[dict[str, Any]]
    """Raw measurements: the CSV."""
    finding: str
    """One sentence, with our figure in it."""
    ours: str
    """Our headline figure, for the index."""
    chapter: str
    """The chapter's figure, for the index ("—" when it gives none)."""
    table: list[dict[str, Any]] | None = None
    """What the Markdown shows; defaults to `rows`."""
    notes: list[str] = field(default_factory=list)
    """Extra paragraphs under the table (method, divergences from the chapter)."""
    chart: Callable[[], Figure] | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    """Named assertions of the finding; all must be true, and the test suite checks them."""
    data: dict[str, Any] = field(default_factory=dict)
    """Anything else the tests may want to look at."""

    @property
    def broken(self) -> list[str]:
        """The checks that failed: the finding did not hold if this is not empty."""
        return [name for name, ok in self.checks.items() if not ok]


def style() -> None:
    plt.rcParams.update(STYLE)


def figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    style()
    fig, ax = plt.subplots()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig, ax


def save_png(fig: Figure, path: Path) -> None:
    # No Software/date metadata, so an unchanged chart is an unchanged file.
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.6f}".rstrip("0").rstrip(".") if value else "0"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value) + "]"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "_(no rows)_\n"
    columns = list(rows[0])
    lines = [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def usd(value: float) -> str:
    return f"${value:.6f}"


def write(
    name: str, title: str, outcome: Outcome, out: Path = RESULTS, *, command: str | None = None
) -> list[Path]:
    """Write `<name>.csv`, `<name>.md` and, if charted, `<name>.png` into `out`.

    `command` is what regenerates the files (default: `python -m experiments <name>`).
    """
    out.mkdir(parents=True, exist_ok=True)
    written = []
    csv = out / f"{name}.csv"
    buf = io.StringIO()
    pd.DataFrame(outcome.rows).to_csv(buf, index=False, lineterminator="\n")
    csv.write_text(buf.getvalue())
    written.append(csv)
    parts = [
        f"# {title}\n",
        f"**Finding.** {outcome.finding}\n",
        markdown_table(outcome.table if outcome.table is not None else outcome.rows),
    ]
    if outcome.chart is not None:
        png = out / f"{name}.png"
        save_png(outcome.chart(), png)
        written.append(png)
        parts.append(f"![{title}]({name}.png)\n")
    parts += [f"{n}\n" for n in outcome.notes]
    command = command or f"python -m experiments {name}"
    parts.append(f"Raw rows: [{name}.csv]({name}.csv). Regenerate: `{command}`.\n")
    md = out / f"{name}.md"
    md.write_text("\n".join(parts))
    written.append(md)
    return written


@contextmanager
def server_process(
    argv: list[str], *, health_url: str, name: str, log: Path | None = None, timeout_s: float = 30.0
) -> Iterator[subprocess.Popen]:
    """Run a server as its own process until `health_url` answers 200; stop it on exit.

    Its output goes to `log` (default: a temporary file), whose tail is quoted if it dies early.
    """
    with open(log, "w+b") if log else tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    out.seek(0)
                    tail = out.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{tail}")
                try:
                    if httpx.get(health_url, timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not answer {health_url} within {timeout_s:.0f} s")
                time.sleep(0.05)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def mock_process(*, host: str = "127.0.0.1", workers: int = 1) -> Iterator[str]:
    """Run `python -m mockprovider` as its own process(es) and yield its `/v1` URL."""
    port = free_port(host)
    argv = [
        sys.executable,
        "-m",
        "mockprovider",
        "--host",
        host,
        "--port",
        str(port),
        "--quiet",
        "--workers",
        str(workers),
    ]
    health = f"http://{host}:{port}/healthz"
    with server_process(argv, health_url=health, name=f"the mock ({workers} worker(s))"):
        yield f"http://{host}:{port}/v1"


# --- running the harness against the mock -------------------------------------------------

TASKS = {
    "plan": "Which file mentions a timeout?",
    "runaway": "Which file mentions a timeout?",
    "recover": "Which file mentions a timeout?",
    "denied": "What does private.key contain?",
    "once": "Which files are in the folder?",
    "repeat": "Which files are in the folder?",
    "destructive": "Look at the log folder and tell me what is in it.",
    "double_delete": "Delete access.log.",
    "slow": "Scan the archive for known incidents.",
    "research": "Find out which file mentions a timeout.",
}


@dataclass(kw_only=True)
class Run:
    state: RunState
    trace: MemoryTrace
    sandbox: Path
    wall_ms: float

    @property
    def tool_runs(self) -> int:
        return len(self.state.tool_runs)

    def runs_of(self, tool: str) -> list[Any]:
        return [
            r.args.get("path") if isinstance(r.args, dict) else r.args
            for r in self.state.tool_runs
            if r.tool == tool
        ]


@dataclass(kw_only=True)
class Setup:
    """Everything one experiment run is given: the core's settings, the chapter's knobs, the seams."""

    model: str
    sandbox: Path
    trace: MemoryTrace
    limits: Limits = field(default_factory=Limits)
    pricing: Pricing = field(default_factory=Pricing)
    errors: Any = "descriptive"
    dedupe: str = "off"
    """off, read-only, or all (the chapter's naive cache)."""
    auto_approve: Any = frozenset()
    max_tokens: int | None = None
    stop_on_permanent: bool = True
    signal_reaches_tools: bool = True
    mock_options: str | None = None
    scan_seconds: float = 3.0
    cancel: Cancel = field(default_factory=Cancel)
    store: Store | None = None
    on_progress: Callable[..., None] | None = None
    checkpoint: Callable[[str], None] | None = None

    def knobs(self) -> Knobs:
        return Knobs(naive_cache=self.dedupe == "all", deaf_tools=not self.signal_reaches_tools,
                     feed_back_permanent=not self.stop_on_permanent)

    def policy(self) -> Policy:
        return Policy(errors=self.errors, dedupe=self.dedupe != "off", auto_approve=self.auto_approve,
                      max_tokens=self.max_tokens)


def options(env: Env, scenario: str, run_id: str, **overrides: Any) -> Setup:
    """The setup of one experiment run: a fresh sandbox (unless one is given) and a trace."""
    if "sandbox" not in overrides:
        overrides["sandbox"] = make_sandbox(env.workdir / run_id)
    return Setup(**({"model": scenario, "trace": MemoryTrace()} | overrides))


ToolsFor = Callable[[OpenAIChat], Sequence[Tool]]
"""Tools built from the run's model (a sub-agent needs a model of its own on the same client)."""


async def run_scenario(
    env: Env,
    scenario: str,
    *,
    run_id: str,
    state: RunState | None = None,
    opts: Setup | None = None,
    tools: ToolsFor | None = None,
    **overrides: Any,
) -> Run:
    """Run (or continue) `scenario` through the harness against the mock; time it."""
    opts = opts or options(env, scenario, run_id, **overrides)
    state = state or new_run(TASKS[scenario], run_id=run_id)
    started = time.perf_counter()
    if env.client is not None:
        await _run(state, opts, env.client, tools)
    else:
        async with ModelClient(env.base_url) as client:
            await _run(state, opts, client, tools)
    wall_ms = (time.perf_counter() - started) * 1000
    return Run(state=state, trace=opts.trace, sandbox=opts.sandbox, wall_ms=wall_ms)


async def _run(state: RunState, opts: Setup, client: ModelClient, tools: ToolsFor | None) -> None:
    headers = {"x-mock-options": opts.mock_options} if opts.mock_options else None
    model = OpenAIChat(opts.model, client=client, headers=headers)
    if tools is not None:
        chosen = list(tools(model))
    else:
        research = model.with_name("plan") if opts.model == "research" else None
        chosen = chapter_tools(opts.sandbox, scan_seconds=opts.scan_seconds, research=research)
    if opts.knobs() != Knobs():
        chosen = [Taught(t, opts.knobs()) for t in chosen]
    await run(state, model=model, tools=chosen, limits=opts.limits, pricing=opts.pricing,
              policy=opts.policy(), cancel=opts.cancel, store=opts.store, trace=opts.trace,
              on_progress=opts.on_progress, checkpoint=opts.checkpoint)


def summary(label: str, r: Run) -> dict[str, Any]:
    """The chapter's summary line as a table row."""
    s = r.state
    return {
        "run": label,
        "turns": s.turns,
        "tools": r.tool_runs,
        "in": s.prompt_tokens,
        "out": s.completion_tokens,
        "cost": usd(s.cost_usd),
        "status": s.status,
    }
