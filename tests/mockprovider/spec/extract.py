"""Writes `openai_subset.json`: the schemas of OpenAI's OpenAPI spec this mock emits, with every
schema they reference, descriptions and examples dropped.

    python tests/mockprovider/spec/extract.py path/to/openapi.json COMMIT

The spec is github.com/openai/openai-openapi's `openapi.json`; the subset is committed so the
conformance tests run offline.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOTS = (
    "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "CompletionUsage",
    "Response", "ResponseStreamEvent", "ResponseErrorEvent", "ResponseFailedEvent", "CreateEmbeddingResponse",
)
DROP = {"description", "x-oaiMeta", "example", "examples", "title"}


def _strip(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if k not in DROP}
    if isinstance(o, list):
        return [_strip(x) for x in o]
    return o


def subset(spec: dict[str, Any]) -> dict[str, Any]:
    schemas = spec["components"]["schemas"]
    seen: set[str] = set()

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            ref = o.get("$ref")
            if isinstance(ref, str) and ref.split("/")[-1] not in seen:
                seen.add(ref.split("/")[-1])
                walk(schemas[ref.split("/")[-1]])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for root in ROOTS:
        seen.add(root)
        walk(schemas[root])
    return {name: _strip(schemas[name]) for name in sorted(seen)}


if __name__ == "__main__":
    source, commit = sys.argv[1], sys.argv[2]
    out = {"source": f"github.com/openai/openai-openapi openapi.json at {commit}",
           "schemas": subset(json.loads(Path(source).read_text()))}
    Path(__file__).with_name("openai_subset.json").write_text(json.dumps(out, separators=(",", ":")))
