"""`report.md`, `report.json` and (when matplotlib is importable) `overhead.png` from a card.

report.json (schema `exitkit-report/1`):

    {"schema": "exitkit-report/1",
     "prices": {"input_usd_per_million": 2.0, "output_usd_per_million": 12.0},
     "cases": {CASE: {"title": str, "criteria": str}},          # in the card's column order
     "adapters": [{"spec": "module:attr", "name": str, "limits": [LIMIT, ...]}],
     "results": [{"case": CASE, "adapter": NAME, "verdict": "pass|warn|fail|none exists|error",
                  "summary": str,                                # the card's cell
                  "figures": {str: number|str|bool|null|list},   # the same keys for every adapter
                  "evidence": {str: ...}}]}                      # e.g. per request: status, tokens, reply

The turn cap's figures include "transcript messages": how many messages of the conversation the
framework's own API handed back to the caller at the stop (`Outcome.transcript_messages`), null
when it handed none back; informational, never part of the verdict.

One object per case per adapter. Nothing in it depends on the clock or the machine's paths,
so an unchanged agent gives an unchanged file except for the timings and overhead figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exitkit.contract import Declared
from exitkit.journal import PRICE_IN_PER_M, PRICE_OUT_PER_M
from exitkit.verdict import CRITERIA, TITLES, VERDICTS, Result

SCHEMA = "exitkit-report/1"


def _same_keys(results: Sequence[Result]) -> list[dict[str, Any]]:
    """Each result as JSON, its figures under every key any adapter has for its case (null where
    it has none: a limit that does not exist, a case that broke), in one order."""
    keys = {c: list(dict.fromkeys(k for r in results if r.case == c for k in r.figures))
            for c in dict.fromkeys(r.case for r in results)}
    return [r.to_json() | {"figures": {k: r.figures.get(k) for k in keys[r.case]}} for r in results]


def to_json(adapters: Sequence[Declared], results: Sequence[Result]) -> dict[str, Any]:
    cases = list(dict.fromkeys(r.case for r in results))
    return {
        "schema": SCHEMA,
        "prices": {"input_usd_per_million": PRICE_IN_PER_M, "output_usd_per_million": PRICE_OUT_PER_M},
        "cases": {c: {"title": TITLES[c], "criteria": CRITERIA[c]} for c in cases},
        "adapters": [{"spec": a.spec, "name": a.name, "limits": sorted(a.limits)} for a in adapters],
        "results": _same_keys(results),
    }


_BREAKS = re.compile(r"\r\n|[\r\n\v\f\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Control characters, and lone surrogates (valid in a JSON escape, never in UTF-8)."""
_MARKUP = re.compile(r"([\\`*\[\]<>|])")


def printable(text: str) -> str:
    """`text` for a terminal: an agent's name, answer or exception may carry control sequences
    (clear the screen, set the title, rewrite the line); they are shown as escapes, never sent."""
    return _CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode(), text)


_UNSAFE_IN_SHELL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def shell_line(words: Sequence[str]) -> str:
    """`words` as one line a shell runs as the same command: each quoted, and a word with a control
    character (a newline in a folder's name) in bash's `$'...'` form, so the line stays one line."""
    def quote(word: str) -> str:
        if not _UNSAFE_IN_SHELL.search(word):
            return shlex.quote(word)
        inner = word.replace("\\", "\\\\").replace("'", "\\'")
        named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
        return "$'" + _UNSAFE_IN_SHELL.sub(lambda m: named.get(m[0], f"\\u{ord(m[0]):04x}"), inner) + "'"

    return " ".join(quote(w) for w in words)


def _code_span(text: str) -> str:
    """`text` (one line) as an inline code span: fenced by one more backtick than its longest run."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"


class _Code(str):
    """The kit's own text shown as code (an adapter spec); only its pipes are escaped."""


def _text(value: Any) -> str:
    """A string an agent, a tool or the provider controls, as inline markdown text: on one line,
    with backslashes, code ticks, emphasis, links, images, HTML and table pipes escaped."""
    return _MARKUP.sub(r"\\\1", printable(_BREAKS.sub(" ", str(value))))


def _cell(value: Any, limit: int = 90) -> str:
    if isinstance(value, _Code):
        return "`" + _BREAKS.sub(" ", value).replace("`", "'").replace("|", "\\|") + "`"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else str(value)
    text = text if len(text) <= limit else text[: limit - 1] + "…"  # cut before escaping: no half escape
    return _text(text)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _card(adapters: Sequence[Declared], results: Sequence[Result], cases: list[str]) -> str:
    by = {(r.adapter, r.case): r for r in results}
    rows = [[a.name] + [by[a.name, c].cell if (a.name, c) in by else "—" for c in cases]
            for a in adapters]
    return _table(["agent"] + [TITLES[c] for c in cases], rows)


def _figures(case: str, results: Sequence[Result]) -> str:
    rows = [r for r in results if r.case == case]
    if case == "overhead":
        per_run = [[r.adapter, *run.values()] for r in rows for run in r.figures.get("per run", [])]
        head = next((list(run) for r in rows for run in r.figures.get("per run", [])), [])
        memory = [[r.adapter] + [v for k, v in r.figures.items() if k != "per run"]
                  for r in rows if r.figures]
        mem_head = next(([k for k in r.figures if k != "per run"] for r in rows if r.figures), [])
        out = _table(["agent", *head], per_run) if per_run else ""
        return out + ("\n" + _table(["agent", *mem_head], memory) if memory else "")
    keys = list(dict.fromkeys(k for r in rows for k in r.figures))
    return _table(["agent", "verdict", *keys], [[r.adapter, r.verdict, *(r.figures.get(k, "") for k in keys)]
                                                 for r in rows])


def _finding(case: str, results: Sequence[Result]) -> str:
    """Who got which verdict, in the order of the verdicts."""
    rows = [r for r in results if r.case == case]
    parts = [f"**{v}**: " + ", ".join(_text(r.adapter) for r in rows if r.verdict == v)
             for v in VERDICTS if any(r.verdict == v for r in rows)]
    return "; ".join(parts) + ".\n"


def markdown(adapters: Sequence[Declared], results: Sequence[Result], *, title: str, command: str,
             chart: str | None, preface: str = "") -> str:
    cases = list(dict.fromkeys(r.case for r in results))
    parts = [f"# {title}\n",
             "Every count (requests, tokens, the text sent back to the model, tool runs and side effects) "
             "is read at the provider — the scripted mock, through the kit's journal of every request and "
             "reply — or from the kit's own tool ledger, which survives processes; never from what an "
             "agent reports about itself. Resumes run in a new process.\n",
             *([preface] if preface else []),
             "## Report card\n", _card(adapters, results, cases),
             "Limits each agent declares it has (the kit never fakes one it lacks: the cell says *none "
             "exists* and what stopped the run):\n",
             _table(["agent", "adapter", "limits"],
                    [[a.name, _Code(a.spec), ", ".join(sorted(a.limits)) or "none"] for a in adapters]),
             "## Verdict criteria\n"]
    parts += [f"- **{TITLES[c]}** — {CRITERIA[c]}" for c in cases]
    parts.append("")
    for c in cases:
        parts += [f"## {TITLES[c]}\n", _finding(c, results), _figures(c, results)]
        if c == "overhead" and chart:
            parts.append(f"![overhead]({chart})\n")
    parts.append(f"Per-request evidence for every case: `report.json`. Regenerate: {_code_span(command)}.\n")
    return "\n".join(parts)


def _literal(name: str) -> str:
    """An agent's name as matplotlib text: a pair of `$` would be parsed as math (and may not parse)."""
    return printable(name).replace("$", r"\$")


def chart(results: Sequence[Result], path: Path) -> bool:
    """The overhead ratios as bars; False (and no file) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in results if r.case == "overhead" and r.figures.get("per run")]
    if not rows:
        return False
    runs = [run["run"] for run in rows[0].figures["per run"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    width = 0.8 / len(rows)
    for i, r in enumerate(rows):
        ratios = {run["run"]: run["× bare httpx"] for run in r.figures["per run"]}
        left.bar([x + i * width for x in range(len(runs))], [ratios.get(n, 0) for n in runs], width,
                 label=_literal(r.adapter))
        right.bar(i, r.figures.get("RSS × bare httpx") or 0, label=_literal(r.adapter))
    left.set_xticks([x + width * (len(rows) - 1) / 2 for x in range(len(runs))], runs)
    left.set_title("overhead per turn, × bare httpx (median)")
    left.legend(fontsize=8)
    right.set_xticks(range(len(rows)), [_literal(r.adapter) for r in rows], rotation=15, fontsize=8)
    right.set_title("peak RSS running plan, × bare httpx")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def unusable(out: Path, name: str = "report") -> str | None:
    """Why the report cannot be written in `out`, or None. Asked before any case runs, so a card
    is never lost after an hour of cases: the folder is made and a file is created in it and
    removed again, so whatever the file system says is found out now; the folders made for the
    probe are removed too, so a run refused later (an adapter that does not load) leaves none."""
    there, made = out, []
    while not there.exists() and not there.is_symlink() and there != there.parent:
        made.append(there)
        there = there.parent
    if not there.is_dir():
        return f"{there} is not a folder"
    try:
        out.mkdir(parents=True, exist_ok=True)
        for suffix in (".json", ".md", ".png"):
            if (path := out / f"{name}{suffix}").is_dir() and not path.is_symlink():
                return f"{path} is a folder, where the report's file goes"
        _put(out / f"{name}.probe", lambda tmp: False)
    except OSError as e:
        return f"cannot write there: {e.strerror or e}"
    finally:
        for folder in made:  # innermost first; one that something else filled meanwhile stays
            with contextlib.suppress(OSError):
                folder.rmdir()
    return None


def _put(path: Path, draw: Any) -> bool:
    """`draw(temporary path)` in `path`'s folder, then that file renamed over `path`: a symlink
    left at `path` is replaced, never written through to a file outside the folder."""
    # Not mkstemp: its file is 0600, and the card would keep that; this one gets the umask's mode.
    tmp = path.parent / f".{path.stem}-{secrets.token_hex(8)}{path.suffix}"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        if drawn := draw(Path(tmp)):
            os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return bool(drawn)


def write(adapters: Sequence[Declared], results: Sequence[Result], out: Path, *,
          title: str = "Exit report card", command: str = "python -m exitkit run …",
          name: str = "report", preface: str = "") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    data, md, png = out / f"{name}.json", out / f"{name}.md", out / f"{name}.png"
    body = json.dumps(to_json(adapters, results), indent=1, ensure_ascii=False) + "\n"
    # A lone surrogate an agent sent as a JSON escape is written back as one, not lost with the card.
    _put(data, lambda tmp: tmp.write_text(body, errors="backslashreplace"))
    drawn = _put(png, lambda tmp: chart(results, tmp))
    text = markdown(adapters, results, title=title, command=command, chart=png.name if drawn else None,
                    preface=preface)
    _put(md, lambda tmp: tmp.write_text(text, errors="backslashreplace"))
    return [data, md] + ([png] if drawn else [])
