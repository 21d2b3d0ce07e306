"""Scenario files: scripts written as JSON or TOML, for tools this package has never heard of.

One scenario per file (docs/scenarios.md has the full format):

    {"name": "weather", "description": "...", "options": "latency=50",
     "turns": [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
               [{"if": {"tool_result_contains": "rain"}, "content": "Take an umbrella."},
                {"content": "No umbrella needed."}]],
     "after_last": "repeat"}

`turns[i]` answers turn `i` (0-based: the number of assistant messages, as for the built-ins):
a reply, or a list of alternatives of which the first whose `if` holds wins (the replies and
conditions are `mockprovider.scripts.parts`). A compiled `FileScenario` is a `Scenario` like
the built-in functions and returns the same `Reply` values, so counting, cuts, streaming and
faults cannot differ, and every endpoint serves it unchanged. An aimock fixture file
(`{"fixtures": [...]}`) is converted to this format first (`mockprovider.scripts.aimock`).

Everything wrong with a file is found here, at start-up: `ScenarioFileError` says the file, the
JSON path of the bad value and what was expected, on one line. Nothing is checked per request.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, assert_never, get_args

from mockprovider.errors import APIError, invalid
from mockprovider.scripts.aimock import from_aimock, is_aimock
from mockprovider.scripts.mcp_tools import McpScript, compile_mcp
from mockprovider.scripts.options import Options, apply
from mockprovider.scripts.parts import Alternative, turn_of
from mockprovider.scripts.scenarios import SCENARIOS, Conversation, Reply, Scenario
from mockprovider.scripts.values import At, ScenarioFileError, array, obj, string

__all__ = [
    "FileScenario", "ScenarioFileError", "Source", "compile_scenario", "load_scenarios", "paths_from_env",
]

AfterLast = Literal["repeat", "error"]
Source = str | os.PathLike[str] | Mapping[str, Any]
"""A file, a folder of files, or an already-parsed scenario (e.g. a dict in a test)."""

SUFFIXES = (".json", ".toml")
MAX_FILE_BYTES = 16 * 1024 * 1024
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A model name: no '+', which starts the options suffix, and nothing a URL or log must escape."""

TOP_KEYS = ("name", "description", "options", "turns", "after_last", "fallback", "mcp")


# --- the compiled scenario: what runs per request -------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FileScenario:
    """A scenario compiled from a file; call it with a `Conversation`, like a built-in."""

    name: str
    description: str
    options: str
    """The file's option string: this scenario's defaults, applied before the request's own."""
    turns: tuple[tuple[Alternative, ...], ...]
    """Empty for a file that scripts only an MCP server."""
    after_last: AfterLast
    source: str
    fallback: str | None = None
    """What a scripted tool-call turn says instead when the request lets no tool be called."""
    mcp: McpScript | None = None
    """The tools, resources and prompts this scenario's MCP server offers (docs/mcp.md)."""

    def __post_init__(self) -> None:
        # `scenarios.describe` reads a scenario's docstring, so /v1/models lists it like a built-in.
        object.__setattr__(self, "__doc__", self.description)

    def __call__(self, c: Conversation) -> Reply:
        if not self.turns:
            raise invalid(
                f"{self.name!r} ({self.source}) scripts only an MCP server, no model turns: connect an MCP "
                f"client to /mcp/{self.name}, and give the model a scenario with 'turns'.",
                param="model", code="no_turns",
            )
        index = c.turn
        if index >= len(self.turns):
            match self.after_last:
                case "repeat":
                    index = len(self.turns) - 1
                case "error":
                    raise invalid(
                        f"The script of {self.name!r} ({self.source}) has ended at turn {c.turn}: it has "
                        f"{len(self.turns)} turns (0 to {len(self.turns) - 1}) and after_last is 'error'.",
                        param="messages", code="script_ended",
                    )
                case _:
                    assert_never(self.after_last)
        for alternative in self.turns[index]:
            if alternative.when is None or alternative.when.holds(c):
                return alternative.reply(c.turn)
        raise invalid(
            f"No alternative of turn {index} of {self.name!r} ({self.source}) holds for this conversation; "
            "end the list with one that has no 'if' to give a fallback.",
            param="messages", code="no_alternative",
        )


# --- reading sources ----------------------------------------------------------------------------


def load_scenarios(
    sources: Iterable[Source], *, taken: Mapping[str, Scenario] = SCENARIOS
) -> dict[str, FileScenario]:
    """Every scenario in `sources`, by name; raises `ScenarioFileError` for the first bad one."""
    found: dict[str, FileScenario] = {}
    for label, data, stem in _documents(sources):
        if is_aimock(data):
            data = from_aimock(data, source=label)
        scenario = compile_scenario(data, source=label, default_name=stem)
        where = f"{label}: $.name" if "name" in data else f"{label}: $ (named after the file)"
        if scenario.name in taken:
            raise ScenarioFileError(
                f"{where}: the name {scenario.name!r} belongs to a built-in scenario; choose another"
            )
        if scenario.name in found:
            raise ScenarioFileError(
                f"{where}: the name {scenario.name!r} is already used by {found[scenario.name].source}"
            )
        found[scenario.name] = scenario
    return found


def paths_from_env(value: str | None) -> list[str]:
    """The paths in a MOCK_SCENARIOS value (separated by ':', or ';' on Windows)."""
    return [part for part in (value or "").split(os.pathsep) if part]


def _documents(sources: Iterable[Source]) -> Iterator[tuple[str, Any, str | None]]:
    """(label for errors, parsed document, file stem) for each scenario in `sources`; a file
    named twice (by two spellings of its path, or in a folder and on its own) is read once."""
    seen: set[tuple[int, int]] = set()
    for number, source in enumerate(sources, 1):
        if isinstance(source, Mapping):
            yield f"<inline scenario {number}>", source, None
            continue
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and not p.name.startswith("."))
            if not files:
                raise ScenarioFileError(f"{path}: the folder holds no {' or '.join(SUFFIXES)} files")
        elif path.exists():
            files = [path]
        else:
            raise ScenarioFileError(f"{path}: no such file or folder")
        for file in files:
            identity = _identity(file)
            if identity in seen:
                continue
            if identity is not None:
                seen.add(identity)
            yield str(file), _parse(file), file.stem


def _identity(path: Path) -> tuple[int, int] | None:
    """The file's (device, inode): the same for every spelling of its path, links included."""
    try:
        status = path.stat()
    except OSError:
        return None  # _parse reports why it cannot be read
    return status.st_dev, status.st_ino


def _parse(path: Path) -> Any:
    if path.suffix not in SUFFIXES:
        raise ScenarioFileError(f"{path}: expected a .json or .toml file, got {path.suffix or 'no suffix'!r}")
    if not path.is_file():
        # Opening a named pipe blocks until something writes to it: start-up would hang.
        raise ScenarioFileError(f"{path}: not a regular file")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ScenarioFileError(f"{path}: cannot read it ({e.strerror or e})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioFileError(f"{path}: larger than the limit of {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioFileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        if path.suffix == ".toml":
            return tomllib.loads(text)
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        where = f"line {e.lineno}, column {e.colno}"
        raise ScenarioFileError(f"{path}: not valid JSON ({where}): {e.msg}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioFileError(f"{path}: not valid TOML: {e}") from None
    except (ValueError, RecursionError) as e:
        raise ScenarioFileError(f"{path}: not valid {path.suffix[1:].upper()}: {e}") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            # A repeated key silently keeps the last value in json.loads: a classic hand-editing slip.
            raise ValueError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


# --- validating and compiling one document ---------------------------------------------------


def compile_scenario(data: Any, *, source: str, default_name: str | None = None) -> FileScenario:
    """One parsed document as a `FileScenario`; raises `ScenarioFileError` naming what is wrong."""
    at = At(source)
    # A file may script only an MCP server (its tools for a built-in model, say): then no turns.
    doc = obj(data, at, TOP_KEYS, required=() if isinstance(data, dict) and "mcp" in data else ("turns",))
    name = _name(doc, at, default_name)
    options = string(doc.get("options", ""), at / "options")
    try:
        apply(Options(), options, param="options")
    except APIError as e:
        raise (at / "options").error(e.message) from None
    after_last = doc.get("after_last", "error")
    if after_last not in get_args(AfterLast):
        raise (at / "after_last").error(f"expected \"repeat\" or \"error\", got {json.dumps(after_last)}")
    turns = array(doc["turns"], at / "turns", "turns") if "turns" in doc else []
    return FileScenario(
        name=name,
        description=string(doc.get("description", f"Scripted in {Path(source).name}."), at / "description"),
        options=options,
        turns=tuple(turn_of(turn, at / "turns" / i) for i, turn in enumerate(turns)),
        after_last=after_last,
        source=source,
        fallback=string(doc["fallback"], at / "fallback") if "fallback" in doc else None,
        mcp=compile_mcp(doc["mcp"], at / "mcp") if "mcp" in doc else None,
    )


def _name(doc: dict, at: At, default: str | None) -> str:
    if "name" not in doc and default is None:
        raise at.error("missing the required key 'name'")
    name = string(doc.get("name", default), at / "name")
    if not NAME.fullmatch(name):
        where = at / "name" if "name" in doc else at
        raise where.error(
            f"the name {name!r} cannot be a model name: use letters, digits, '_', '.' and '-' "
            "(at most 64, starting with a letter or digit)"
        )
    return name
