"""`pytest --exitkit MODULE:ADAPTER` (or `--exitkit-command CMD`): the kit's cases as tests in a user's CI.

Each case for each adapter is one test item, named `exitkit[<adapter>-<case>]`. A `fail` or
`error` verdict fails the test with the verdict's criteria and its figures (the evidence); a
limit the framework lacks (`none exists`) is a skip that says so; `warn` passes (the report
card shows it). Opt out of cases with `--exitkit-skip turn_cap,crash` (or the `exitkit_skip`
ini option). `--exitkit-out DIR` also writes the report card there.

Everything is imported lazily: the plugin is loaded by every pytest run in an environment
that installs this package, and costs nothing unless `--exitkit` is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("exitkit", "the five exits, measured at the provider")
    group.addoption("--exitkit", action="append", default=[], metavar="MODULE:ADAPTER",
                    help="run the exit cases against this adapter (repeatable)")
    group.addoption("--exitkit-command", action="append", default=[], metavar="CMD",
                    help="run the exit cases against this command, an agent in any language (repeatable)")
    group.addoption("--exitkit-skip", default=None, metavar="CASE,...", help="cases not to run")
    group.addoption("--exitkit-out", default=None, metavar="DIR", help="also write the report card here")
    parser.addini("exitkit_skip", "cases the --exitkit run leaves out", default="")


class ExitCaseFailed(Exception):
    """A case's verdict was fail or error; the message carries the evidence."""


class _Session:
    """One mock and one folder for every exitkit item of the pytest session."""

    def __init__(self, config: pytest.Config) -> None:
        import tempfile

        from exitkit.runner import Kit

        self._tmp = tempfile.TemporaryDirectory(prefix="exitkit-")
        self._serving = Kit.serve(Path(self._tmp.name))
        self.kit = self._serving.__enter__()
        self.loaded: dict[str, tuple[Any, Any]] = {}
        self.results: list[Any] = []
        config.add_cleanup(self.close)

    def adapter(self, spec: str, command: bool = False) -> tuple[Any, Any]:
        import os

        from exitkit.command import argv_of, describe
        from exitkit.loader import AdapterError, declared, load

        if spec not in self.loaded and command:
            who = describe(spec, os.environ)
            if any(known.name == who.name for _, known in self.loaded.values()):
                raise AdapterError(f"two adapters named {who.name!r}: give each a `name` of its own")
            self.kit.commands[spec] = argv_of(spec)
            self.loaded[spec] = None, who
        if spec not in self.loaded:
            adapter = load(spec)
            if any(who.name == adapter.name for _, who in self.loaded.values()):
                raise AdapterError(f"two adapters named {adapter.name!r}: give each a `name` of its own")
            self.loaded[spec] = adapter, declared(spec, adapter)
        return self.loaded[spec]

    def close(self) -> None:
        self._serving.__exit__(None, None, None)
        self._tmp.cleanup()


EVIDENCE_CHARS = 6000
"""The per-request evidence is long for a runaway; the failure shows its start, report.json all."""


def failure_text(result: Any) -> str:
    """A failed case as pytest shows it: the cell, the criteria, the figures and the evidence."""
    from exitkit.report import printable
    from exitkit.verdict import CRITERIA

    def dump(value: Any) -> str:
        return json.dumps(value, indent=1, ensure_ascii=False, default=str)

    evidence = dump(result.evidence)
    if len(evidence) > EVIDENCE_CHARS:
        evidence = evidence[:EVIDENCE_CHARS] + "\n… (the rest: --exitkit-out DIR writes report.json)"
    text = (f"{result.adapter} · {result.case}: {result.cell}\n\ncriteria: {CRITERIA[result.case]}"
            f"\n\nfigures: {dump(result.figures)}\n\nevidence: {evidence}")
    return "\n".join(printable(line) for line in text.split("\n"))  # pytest prints it on a terminal


class ExitCase(pytest.Item):
    def __init__(self, *, spec: str, case: str, command: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.case, self.command = spec, case, command

    def _session(self) -> _Session:
        stash = self.config.stash
        if _KEY not in stash:
            stash[_KEY] = _Session(self.config)
        return stash[_KEY]

    def runtest(self) -> None:
        from exitkit.card import run_case

        session = self._session()
        _, who = session.adapter(self.spec, self.command)
        result = run_case(session.kit, who, self.case, fast=True)
        session.results.append(result)
        self.user_properties.append(("exitkit", result.cell))
        if result.verdict == "none exists":
            from exitkit.report import printable

            pytest.skip(printable(f"{who.name}: {result.summary}"))
        if result.verdict in ("fail", "error"):
            raise ExitCaseFailed(failure_text(result))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from exitkit.loader import AdapterError

        if isinstance(excinfo.value, (ExitCaseFailed, AdapterError)):  # a bad spec: its one line says it
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        return self.path, None, f"exitkit[{self.spec}-{self.case}]"


_KEY = pytest.StashKey[_Session]()


def _skipped(config: pytest.Config) -> list[str]:
    text = config.getoption("--exitkit-skip") or config.getini("exitkit_skip") or ""
    return [n.strip() for n in str(text).split(",") if n.strip()]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    specs, commands = config.getoption("--exitkit"), config.getoption("--exitkit-command")
    if not specs and not commands:
        return
    from exitkit.card import pick

    try:
        cases = pick(skip=_skipped(config))
    except ValueError as e:
        raise pytest.UsageError(f"--exitkit-skip: {e}") from e
    from exitkit.report import unusable

    out = config.getoption("--exitkit-out")
    if out and (why := unusable(Path(out))):  # found when the session ends, it would lose the card
        raise pytest.UsageError(f"--exitkit-out {out!r}: {why}")
    # A spec given twice is one adapter: one row, one test per case.
    for spec, command in {**dict.fromkeys(specs, False), **dict.fromkeys(commands, True)}.items():
        for case in cases:
            items.append(ExitCase.from_parent(session, name=f"exitkit[{spec}-{case}]", spec=spec, case=case,
                                              command=command))


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    out = config.getoption("--exitkit-out", None)
    stash = config.stash
    if out and _KEY in stash and stash[_KEY].results:
        from exitkit.report import shell_line, write

        state = stash[_KEY]
        words = ["pytest", *(w for spec in config.getoption("--exitkit") for w in ("--exitkit", spec)),
                 *(w for line in config.getoption("--exitkit-command") for w in ("--exitkit-command", line))]
        write([who for _, who in state.loaded.values()], state.results, Path(out), command=shell_line(words))
