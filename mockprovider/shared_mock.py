"""A mock shared by a whole test run, started outside it (a CI service, one mock for every
pytest-xdist worker): the fixtures reach it over HTTP when given `--mock-llm-url` or
`MOCK_LLM_URL`, and read its journal through `GET /journal?test_id=...`.

Such a mock serves the scenario files it was started with; per-request options (the model
suffix, the base URL's `/o/...` prefix) work as on any mock. Each test's requests carry its id
(`/o/test=ID`), so its journal and counted attempts are its own, whichever worker runs it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from mockprovider.journal import Entry, Headers, model_named

URL_ENV = "MOCK_LLM_URL"
"""The shared mock's URL when `--mock-llm-url` is not given."""


class SharedMockError(ValueError):
    """The shared mock cannot serve the fixtures: unreachable, or keeping no journal."""


class RemoteJournal:
    """The journal of a mock in another process: what `GET /journal` shows, read like a `Journal`.
    `clear` cannot empty another process's journal, so it remembers where this run stopped looking."""

    def __init__(self, root_url: str) -> None:
        self.root_url = root_url
        self._seen_up_to: dict[str | None, int] = {}
        self.capacity = self._page(None)["capacity"]

    def _page(self, test_id: str | None) -> dict[str, Any]:
        try:
            page = httpx.get(f"{self.root_url}/journal", params={"test_id": test_id} if test_id else None,
                             timeout=30)
        except httpx.HTTPError as e:
            raise SharedMockError(f"the shared mock at {self.root_url} cannot be reached: {e}") from None
        if page.status_code == 404:
            raise SharedMockError(f"the shared mock at {self.root_url} keeps no journal: start it with "
                                  "--journal N")
        page.raise_for_status()
        return page.json()

    def entries(self, *, test_id: str | None = None) -> list[Entry]:
        since = max(self._seen_up_to.get(None, -1), self._seen_up_to.get(test_id, -1))
        return [_entry(e) for e in self._page(test_id)["data"] if e["seq"] > since]

    def clear(self, *, test_id: str | None = None) -> None:
        seen = [e.seq for e in self.entries(test_id=test_id)]
        if seen:
            self._seen_up_to[test_id] = max(seen)


def _entry(shown: dict[str, Any]) -> Entry:
    body = shown["body"]
    return Entry(seq=shown["seq"], method=shown["method"], path=shown["path"], test_id=shown.get("test_id"),
                 headers=Headers(shown["headers"]), compact=json.dumps(body).encode(),
                 model=model_named(shown["path"], body.get("model") if isinstance(body, dict) else None))


def root_of(url: str) -> str:
    """The mock's root URL, whether given as `http://host:port` or its `/v1` base URL."""
    return url.rstrip("/").removesuffix("/v1")


def check_ready(root_url: str) -> None:
    """`SharedMockError` unless the mock at `root_url` answers `/readyz`."""
    try:
        ready = httpx.get(f"{root_url}/readyz", timeout=30)
    except httpx.HTTPError as e:
        raise SharedMockError(f"the shared mock at {root_url} cannot be reached: {e}") from None
    if ready.status_code != 200:
        raise SharedMockError(f"the shared mock at {root_url} is not ready: /readyz answered "
                              f"{ready.status_code}")
