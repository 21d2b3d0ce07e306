"""Helpers the Responses and Messages tests share: generated input, docs/mock.md snippets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st

from mockprovider.server import serve_in_thread

PAGE = Path(__file__).parents[2] / "docs" / "mock.md"

TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates included
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def post_generated(client: httpx.Client, path: str, body: object) -> httpx.Response:
    """POST a generated body as JSON, noting the status for hypothesis' statistics."""
    response = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    event(f"status {response.status_code}")
    return response


def run_docs_snippet(heading: str) -> None:
    """Run the first Python block under `heading` in docs/mock.md against a fresh mock."""
    found = re.search(rf"## {re.escape(heading)}\n.*?```python\n(.*?)```", PAGE.read_text(), re.S)
    assert found, f"docs/mock.md has no Python block under '## {heading}'"
    with serve_in_thread() as url:
        exec(found.group(1).replace("http://127.0.0.1:8000", url.removesuffix("/v1")), {})
