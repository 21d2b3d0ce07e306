"""The `browser` fixture: a real headless Chromium through chromedriver, or a skip saying why."""

from __future__ import annotations

import pytest
from webdriver import CHROMEDRIVER, CHROMIUM, chromium, installed


@pytest.fixture
def browser(tmp_path):
    if not installed():
        pytest.skip(f"Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}): "
                    "apt-get install chromium chromium-driver (.ci/run does it)")
    with chromium(tmp_path / "profile") as b:
        yield b
