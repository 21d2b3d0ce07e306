"""Scenario files: scripts written as JSON or TOML, for tools this package has never heard of.

One scenario per file (the README has the full format):

    {"name": "weather", "description": "...", "options": "latency=50",
     "turns": [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
               [{"if": {"tool_result_contains": "rain"}, "content": "Take an umbrella."},
                {"content": "No umbrella needed."}]],
     "after_last": "repeat"}

`turns[i]` answers turn `i` (the number of assistant messages, as for the built-ins): a reply,
or a list of alternatives of which the first whose `if` holds wins. A compiled `FileScenario`
is a `Scenario` like the built-in functions and returns the same `Reply` values, so counting,
cuts, streaming and faults cannot differ, and every endpoint serves it unchanged.

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

from mockprovider import faults
from mockprovider.conditions import (
    All,
    AnyOf,
    AnyToolResultContains,
    Condition,
    ToolResultContains,
    ToolResultMatches,
    UserContains,
    backtracking_risk,
)
from mockprovider.errors import APIError, invalid
from mockprovider.scenarios import SCENARIOS, Conversation, Reply, Scenario, ToolCall

AfterLast = Literal["repeat", "error"]
Source = str | os.PathLike[str] | Mapping[str, Any]
"""A file, a folder of files, or an already-parsed scenario (e.g. a dict in a test)."""

SUFFIXES = (".json", ".toml")
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_NESTING = 32
"""Deepest `all`/`any` nesting accepted; deeper is a mistake, and would recurse per request."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A model name: no '+', which starts the options suffix, and nothing a URL or log must escape."""

TOP_KEYS = ("name", "description", "options", "turns", "after_last", "fallback")
REPLY_KEYS = ("content", "tool_calls")
CALL_KEYS = ("name", "arguments", "id")
CONDITION_KEYS = (
    "tool_result_contains", "any_tool_result_contains", "tool_result_matches", "user_contains", "all", "any",
)


class ScenarioFileError(ValueError):
    """A scenario file that cannot be served; the message is one line naming file, path and fix."""


# --- the compiled scenario: what runs per request -------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CallTemplate:
    name: str
    arguments: str
    """Sent verbatim: an object from the file is serialised once, at load."""
    id: str | None
    """None: a deterministic id from the turn and position, `call_<turn>_<index>`."""


@dataclass(frozen=True, kw_only=True)
class Alternative:
    when: Condition | None
    """None: always."""
    content: str | None
    calls: tuple[CallTemplate, ...]

    def reply(self, turn: int) -> Reply:
        if self.content is not None:
            return Reply(content=self.content)
        return Reply(tool_calls=tuple(
            ToolCall(id=call.id or f"call_{turn}_{index}", name=call.name, arguments=call.arguments)
            for index, call in enumerate(self.calls)
        ))


@dataclass(frozen=True, kw_only=True)
class FileScenario:
    """A scenario compiled from a file; call it with a `Conversation`, like a built-in."""

    name: str
    description: str
    options: str
    """The file's option string: this scenario's defaults, applied before the request's own."""
    turns: tuple[tuple[Alternative, ...], ...]
    after_last: AfterLast
    source: str
    fallback: str | None = None
    """What a scripted tool-call turn says instead when the request lets no tool be called."""

    def __post_init__(self) -> None:
        # `scenarios.describe` reads a scenario's docstring, so /v1/models lists it like a built-in.
        object.__setattr__(self, "__doc__", self.description)

    def __call__(self, c: Conversation) -> Reply:
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
    """(label for errors, parsed document, file stem) for each scenario in `sources`."""
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
            yield str(file), _parse(file), file.stem


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


@dataclass(frozen=True)
class _At:
    """Where a value sits: the file and the JSON path, for the error that names it."""

    source: str
    path: str = "$"

    def __truediv__(self, step: str | int) -> _At:
        if isinstance(step, int):
            return _At(self.source, f"{self.path}[{step}]")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", step):
            return _At(self.source, f"{self.path}.{step}")
        return _At(self.source, f"{self.path}[{json.dumps(step)}]")

    def error(self, problem: str) -> ScenarioFileError:
        return ScenarioFileError(f"{self.source}: {self.path}: {problem}")


def _kind(value: Any) -> str:
    match value:
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case dict():
            return "an object"
        case None:
            return "null"
        case _:
            return f"a {type(value).__name__}"  # TOML dates and times


def _object(value: Any, at: _At, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, dict):
        raise at.error(f"expected an object, got {_kind(value)}")
    for key in value:
        if key not in allowed:
            raise (at / key).error(f"unknown key; expected one of: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise at.error(f"missing the required key {key!r}")
    return value


def _string(value: Any, at: _At, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise at.error(f"expected a string, got {_kind(value)}")
    if nonempty and not value:
        raise at.error("expected a non-empty string")
    return _unicode(value, at)


def _unicode(text: str, at: _At) -> str:
    """`text`, unless a JSON escape such as \\ud800 left a lone surrogate in it: no UTF-8 text can
    carry one (/v1/models answered 500 for a description holding one; strict clients refuse it)."""
    if not text.isascii():
        lone = next((ch for ch in text if "\ud800" <= ch <= "\udfff"), None)
        if lone is not None:
            raise at.error(
                f"holds a lone surrogate (\\u{ord(lone):04x}), which UTF-8 cannot encode; "
                "write a character outside the BMP as the pair of escapes that encodes it, or unescaped"
            )
    return text


def _array(value: Any, at: _At, what: str) -> list:
    if not isinstance(value, list):
        raise at.error(f"expected an array of {what}, got {_kind(value)}")
    if not value:
        raise at.error(f"expected at least one of {what}, got an empty array")
    return value


def compile_scenario(data: Any, *, source: str, default_name: str | None = None) -> FileScenario:
    """One parsed document as a `FileScenario`; raises `ScenarioFileError` naming what is wrong."""
    at = _At(source)
    doc = _object(data, at, TOP_KEYS, required=("turns",))
    name = _name(doc, at, default_name)
    options = _string(doc.get("options", ""), at / "options")
    try:
        faults.apply(faults.Options(), options, param="options")
    except APIError as e:
        raise (at / "options").error(e.message) from None
    after_last = doc.get("after_last", "error")
    if after_last not in get_args(AfterLast):
        raise (at / "after_last").error(f"expected \"repeat\" or \"error\", got {json.dumps(after_last)}")
    turns = _array(doc["turns"], at / "turns", "turns")
    return FileScenario(
        name=name,
        description=_string(doc.get("description", f"Scripted in {Path(source).name}."), at / "description"),
        options=options,
        turns=tuple(_turn(turn, at / "turns" / i) for i, turn in enumerate(turns)),
        after_last=after_last,
        source=source,
        fallback=_string(doc["fallback"], at / "fallback") if "fallback" in doc else None,
    )


def _name(doc: dict, at: _At, default: str | None) -> str:
    if "name" not in doc and default is None:
        raise at.error("missing the required key 'name'")
    name = _string(doc.get("name", default), at / "name")
    if not NAME.fullmatch(name):
        where = at / "name" if "name" in doc else at
        raise where.error(
            f"the name {name!r} cannot be a model name: use letters, digits, '_', '.' and '-' "
            "(at most 64, starting with a letter or digit)"
        )
    return name


def _turn(value: Any, at: _At) -> tuple[Alternative, ...]:
    if isinstance(value, dict):
        return (_alternative(value, at, conditional=False),)
    if isinstance(value, list):
        alternatives = _array(value, at, "alternatives")
        return tuple(_alternative(a, at / i, conditional=True) for i, a in enumerate(alternatives))
    raise at.error(f"expected a reply object or an array of alternatives, got {_kind(value)}")


def _alternative(value: Any, at: _At, *, conditional: bool) -> Alternative:
    allowed = ("if", *REPLY_KEYS) if conditional else REPLY_KEYS
    if not conditional and isinstance(value, dict) and "if" in value:
        raise (at / "if").error("'if' belongs on an alternative: put this reply in an array of alternatives")
    reply = _object(value, at, allowed)
    given = [key for key in REPLY_KEYS if key in reply]
    if len(given) != 1:
        got = "both" if given else "neither"
        raise at.error(f"expected exactly one of 'content' or 'tool_calls', got {got}")
    when = _condition(reply["if"], at / "if") if "if" in reply else None
    if "content" in reply:
        return Alternative(when=when, content=_string(reply["content"], at / "content"), calls=())
    calls = _array(reply["tool_calls"], at / "tool_calls", "tool calls")
    return Alternative(
        when=when, content=None, calls=tuple(_call(c, at / "tool_calls" / i) for i, c in enumerate(calls))
    )


def _call(value: Any, at: _At) -> CallTemplate:
    call = _object(value, at, CALL_KEYS, required=("name",))
    arguments = call.get("arguments", {})
    if isinstance(arguments, dict):
        try:
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            raise (at / "arguments").error("expected JSON values only (no dates, NaN or infinity)") from None
    elif not isinstance(arguments, str):
        raise (at / "arguments").error(f"expected an object or a JSON string, got {_kind(arguments)}")
    return CallTemplate(
        name=_string(call["name"], at / "name", nonempty=True),
        arguments=_unicode(arguments, at / "arguments"),
        id=_string(call["id"], at / "id", nonempty=True) if "id" in call else None,
    )


def _condition(value: Any, at: _At, depth: int = 0) -> Condition:
    if depth > MAX_NESTING:
        raise at.error(f"conditions nest deeper than {MAX_NESTING} levels")
    tests = _object(value, at, CONDITION_KEYS)
    if not tests:
        raise at.error(f"expected at least one condition: {', '.join(CONDITION_KEYS)}")
    parts = tuple(_test(key, tests[key], at / key, depth) for key in tests)
    # Several keys in one object must all hold, as in a query.
    return parts[0] if len(parts) == 1 else All(conditions=parts)


def _test(key: str, value: Any, at: _At, depth: int) -> Condition:
    match key:
        case "tool_result_contains":
            return ToolResultContains(text=_string(value, at, nonempty=True))
        case "any_tool_result_contains":
            return AnyToolResultContains(text=_string(value, at, nonempty=True))
        case "user_contains":
            return UserContains(text=_string(value, at, nonempty=True))
        case "tool_result_matches":
            pattern = _string(value, at, nonempty=True)
            try:
                compiled = re.compile(pattern)
                risk = backtracking_risk(pattern)  # walks the parsed pattern: deep nesting recurses
            except (re.error, RecursionError, OverflowError) as e:
                raise at.error(f"not a valid regular expression ({e})") from None
            if risk:
                raise at.error(
                    f"{risk} on the client's tool text; use an atomic group (?>...) or a possessive "
                    "repeat (*+, ++), or split the test with 'all'"
                )
            return ToolResultMatches(pattern=compiled)
        case "all" | "any":
            items = _array(value, at, "conditions")
            parts = tuple(_condition(item, at / i, depth + 1) for i, item in enumerate(items))
            return All(conditions=parts) if key == "all" else AnyOf(conditions=parts)
    raise AssertionError(f"unhandled condition key {key!r}")  # _object admitted only CONDITION_KEYS
