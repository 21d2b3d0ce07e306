"""Where a value sits in a scenario file, and the checks that name it when it is wrong.

Every loader of scenario documents (our own format, aimock's fixtures) reports a bad value the
same way: one line with the file, the JSON path of the value and what was expected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


class ScenarioFileError(ValueError):
    """A scenario file that cannot be served; the message is one line naming file, path and fix."""


@dataclass(frozen=True)
class At:
    """Where a value sits: the file and the JSON path, for the error that names it."""

    source: str
    path: str = "$"

    def __truediv__(self, step: str | int) -> At:
        if isinstance(step, int):
            return At(self.source, f"{self.path}[{step}]")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", step):
            return At(self.source, f"{self.path}.{step}")
        return At(self.source, f"{self.path}[{json.dumps(step)}]")

    def error(self, problem: str) -> ScenarioFileError:
        return ScenarioFileError(f"{self.source}: {self.path}: {problem}")


def kind(value: Any) -> str:
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


def obj(value: Any, at: At, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, dict):
        raise at.error(f"expected an object, got {kind(value)}")
    for key in value:
        if key not in allowed:
            raise (at / key).error(f"unknown key; expected one of: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise at.error(f"missing the required key {key!r}")
    return value


def string(value: Any, at: At, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise at.error(f"expected a string, got {kind(value)}")
    if nonempty and not value:
        raise at.error("expected a non-empty string")
    return unicode(value, at)


def unicode(text: str, at: At) -> str:
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


def array(value: Any, at: At, what: str) -> list:
    if not isinstance(value, list):
        raise at.error(f"expected an array of {what}, got {kind(value)}")
    if not value:
        raise at.error(f"expected at least one of {what}, got an empty array")
    return value


def number(value: Any, at: At, low: float, high: float, *, integer: bool = False) -> float:
    """A number from `low` to `high` (a whole one if `integer`)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise at.error(f"expected a number, got {kind(value)}")
    # The range first: it refuses NaN and the infinities, which int() cannot convert.
    if not low <= value <= high:
        raise at.error(f"expected a number from {low:g} to {high:g}, got {value}")
    if integer and value != int(value):
        raise at.error(f"expected a whole number, got {value}")
    return int(value) if integer else float(value)


def json_value(value: Any, at: At) -> Any:
    """`value` if it can go on the wire as JSON (TOML's dates cannot; nor can NaN or infinity)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise at.error("expected JSON values only (no dates, NaN or infinity)") from None
    return value


def json_object(value: Any, at: At) -> dict[str, Any]:
    """An object of any keys, made of JSON values only."""
    return json_value(obj(value, at, tuple(value) if isinstance(value, dict) else ()), at)


def flag(fields: dict[str, Any], key: str, at: At, default: bool = False) -> bool:
    """`fields[key]`, true or false (`default` when absent)."""
    value = fields.get(key, default)
    if not isinstance(value, bool):
        raise (at / key).error(f"expected true or false, got {kind(value)}")
    return value
