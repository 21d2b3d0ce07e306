"""Checks a body or event against the committed subset of OpenAI's OpenAPI spec.

A small JSON Schema reader for the keywords that subset uses (`$ref`, `allOf`, `anyOf`,
`oneOf`, `type`, `enum`, `required`, `properties`, `items`, `minimum`); `oneOf` is read as
`anyOf` (the spec's unions of event and item types overlap only where a `type` enum already
tells them apart). Returns the list of departures, each naming the path in the body.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_TYPES = {
    "string": str, "boolean": bool, "object": dict, "array": list, "null": type(None),
}


@cache
def schemas() -> dict[str, Any]:
    return json.loads((Path(__file__).parent / "spec" / "openai_subset.json").read_text())["schemas"]


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def errors(value: Any, schema: dict[str, Any] | str, path: str = "$") -> list[str]:
    """Every way `value` departs from `schema` (a schema or the name of one in the subset)."""
    if isinstance(schema, str):
        schema = {"$ref": f"#/components/schemas/{schema}"}
    if value is None and schema.get("nullable"):
        return []
    if "$ref" in schema:
        return errors(value, schemas()[schema["$ref"].split("/")[-1]], path)
    found: list[str] = []
    for sub in schema.get("allOf", ()):
        found += errors(value, sub, path)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            tried = [errors(value, sub, path) for sub in options]
            if all(tried):
                found.append(f"{path}: matches none of {key}: " + min(tried, key=len)[0])
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_type_ok(k, value) for k in kinds):
            return [*found, f"{path}: {value!r:.60} is not of type {kind}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r:.60} is not one of {schema['enum']}")
    if "minimum" in schema and isinstance(value, int | float) and value < schema["minimum"]:
        found.append(f"{path}: {value} is below the minimum {schema['minimum']}")
    if isinstance(value, dict):
        found += [f"{path}: missing required {k!r}" for k in schema.get("required", ()) if k not in value]
        for k, sub in schema.get("properties", {}).items():
            if k in value:
                found += errors(value[k], sub, f"{path}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += errors(item, schema["items"], f"{path}[{i}]")
    return found
