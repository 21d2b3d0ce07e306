"""Fixtures of the reliability suite (helpers live in `reliability_support`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from reliability_support import Ledger, RequestLog

from mockprovider.server import serve_in_thread


@pytest.fixture(scope="session")
def ledger() -> Ledger:
    return Ledger(os.environ.get("RELIABILITY_LEDGER"))


@pytest.fixture(scope="module")
def counted_mock() -> Iterator[tuple[str, RequestLog]]:
    """A real loopback mock in this process, and a log of every chat request it answered."""
    logger = logging.getLogger("mockprovider")
    handler, level, propagate = RequestLog(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # thousands of request lines would bury a failure's report
    try:
        with serve_in_thread() as url:
            yield url, handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
