"""Report writing: an experiment's measurement becomes `<name>.csv`, `<name>.md` and `<name>.png`.

Every experiment module has `NAME`, `TITLE`, `async measure(env) -> <its frozen dataclass>`,
and three functions over that measurement: `table(m) -> Table`, `checks(m) -> dict[str, bool]`
and `prose(m) -> Prose`, plus optionally `chart(m) -> Figure`. `outcome()` assembles them and
`write()` writes the files. The token and cost experiments are pure arithmetic, so a rerun with
unchanged code leaves their files byte-identical; CSV cells are written as given, so counts stay
integers. A timed experiment (latency, cancellation) also gives a `steady` table without its
wall-clock columns: that one is committed, and its figures go to `wall-clock/`, which is not, so
a rerun leaves the checkout clean.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from matplotlib.figure import Figure

from experiments.lab.charts import save_png
from experiments.lab.paths import RESULTS

Row = dict[str, Any]
WALL_CLOCK = "wall-clock"
"""The folder under `results/` for figures that move between reruns (git ignores it)."""


@dataclass(frozen=True, kw_only=True)
class Table:
    rows: list[Row]
    """Raw measurements: the CSV."""
    shown: list[Row] | None = None
    """What the Markdown shows (ours beside the chapter's); defaults to `rows`."""
    steady: list[Row] | None = None
    """A timed experiment's rows without wall-clock columns, which a rerun reproduces byte for byte:
    the committed table. `rows` and `shown` then go to `wall-clock/`."""


@dataclass(frozen=True, kw_only=True)
class Prose:
    finding: str
    """One sentence, with our figure in it."""
    ours: str
    """Our headline figure, for the index."""
    chapter: str
    """The chapter's figure, for the index ("—" when it gives none)."""
    headline: str = ""
    """The finding without wall-clock figures, for the index (default: the finding)."""
    explained: str = ""
    """Where ours differs from the chapter's, the number that explains it (for the index)."""
    notes: list[str] = field(default_factory=list)
    """Paragraphs under the table: method, and the number that explains each difference."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One experiment's measurement, tabulated, described and checked."""

    measured: Any
    table: Table
    prose: Prose
    checks: dict[str, bool]
    """Named assertions of the finding; all must be true, and the test suite checks them."""
    chart: Callable[[], Figure] | None = None

    @property
    def broken(self) -> list[str]:
        """The checks that failed: the finding did not hold if this is not empty."""
        return [name for name, ok in self.checks.items() if not ok]


def outcome(module: ModuleType, measured: Any) -> Outcome:
    """Tabulate, describe and check a measurement with its module's functions."""
    draw = getattr(module, "chart", None)
    return Outcome(
        measured=measured,
        table=module.table(measured),
        prose=module.prose(measured),
        checks=module.checks(measured),
        chart=(lambda: draw(measured)) if draw else None,
    )


def usd(value: float) -> str:
    return f"${value:.6f}" if value >= 0 else f"−${-value:.6f}"


def usd_short(value: float) -> str:
    """Dollars as the chapter prints a round figure: $0.010, $0.038."""
    return "$" + f"{value:.6f}".rstrip("0").ljust(5, "0")


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


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV of `rows` (columns in order of first appearance); an int stays an int."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write(
    name: str, title: str, o: Outcome, out: Path = RESULTS, *, command: str | None = None
) -> list[Path]:
    """Write `<name>.csv`, `<name>.md` and, if charted, `<name>.png` into `out`; for a timed
    experiment, the steady table there and the wall-clock files in `out/wall-clock/`.

    `command` is what regenerates the files (default: `python -m experiments <name>`).
    """
    if o.table.steady is None:
        return _write(name, title, o, out, command)
    timed = _write(name, title, o, out / WALL_CLOCK, command)
    pointer = (f"This run's wall-clock figures, with their chart: `results/{WALL_CLOCK}/{name}.md`, "
               "rewritten by every rerun and not committed, since they move between runs; the checks "
               "above look only at what ran. `make bench` records the times (bench.md).")
    steady = replace(o, table=Table(rows=o.table.steady), chart=None,
                     prose=replace(o.prose, finding=o.prose.headline or o.prose.finding, notes=[pointer]))
    return _write(name, title, steady, out, command) + timed


def _write(name: str, title: str, o: Outcome, out: Path, command: str | None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"{name}.csv"
    csv_path.write_text(csv_text(o.table.rows))
    written = [csv_path]
    parts = [
        f"# {title}\n",
        f"**Finding.** {o.prose.finding}\n",
        markdown_table(o.table.shown if o.table.shown is not None else o.table.rows),
    ]
    if o.chart is not None:
        png = out / f"{name}.png"
        save_png(o.chart(), png)
        written.append(png)
        parts.append(f"![{title}]({name}.png)\n")
    parts += [f"{n}\n" for n in o.prose.notes]
    parts.append(
        "**Checks.** "
        + "; ".join(f"{c}: {'held' if ok else '**did not hold**'}" for c, ok in o.checks.items())
        + ".\n"
    )
    command = command or f"python -m experiments {name}"
    parts.append(f"Raw rows: [{name}.csv]({name}.csv). Regenerate: `{command}`.\n")
    md = out / f"{name}.md"
    md.write_text("\n".join(parts))
    written.append(md)
    return written
