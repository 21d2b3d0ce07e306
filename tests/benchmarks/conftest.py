"""Conversations of a chosen length, built the way a `runaway` run grows them."""

from __future__ import annotations

import pytest

from experiments.bench.floor import request_body, runaway_messages


@pytest.fixture(scope="session")
def runaway_100() -> list[dict]:
    return runaway_messages(100)


@pytest.fixture(scope="session")
def bodies() -> dict[int, bytes]:
    return {t: request_body(t) for t in (1, 50, 100)}
