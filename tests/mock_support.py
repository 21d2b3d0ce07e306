"""A mock serving scenario functions a test writes itself (beside the built-in ones)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

from mockprovider.app import create_app
from mockprovider.scripts.scenarios import Scenario
from mockprovider.server import serve_in_thread


@contextmanager
def serve_scripts(**scripts: Scenario) -> Iterator[str]:
    """Serve a mock whose model names are `scripts`' keywords; yield its `/v1` base URL."""
    app = create_app()
    app.state.config = dataclasses.replace(app.state.config, scenarios=scripts)
    with serve_in_thread(app) as url:
        yield url
