"""Checks the MCP parts of a scenario file share, beside `mockprovider.file_values`."""

from __future__ import annotations

import json
from typing import Any

from mockprovider import file_values
from mockprovider.file_values import At


def json_value(value: Any, at: At) -> Any:
    """`value` if it can go on the wire as JSON (TOML's dates cannot; nor can NaN or infinity)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise at.error("expected JSON values only (no dates, NaN or infinity)") from None
    return value


def json_object(value: Any, at: At) -> dict[str, Any]:
    """An object of any keys, made of JSON values only."""
    return json_value(file_values.obj(value, at, tuple(value) if isinstance(value, dict) else ()), at)


def flag(step: dict[str, Any], key: str, at: At, default: bool = False) -> bool:
    value = step.get(key, default)
    if not isinstance(value, bool):
        raise (at / key).error(f"expected true or false, got {file_values.kind(value)}")
    return value
