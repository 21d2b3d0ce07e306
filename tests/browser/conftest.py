"""The `browser` fixture: a real headless Chromium under Selenium, or a skip saying why."""

from __future__ import annotations

import pytest
from chromium import CHROMEDRIVER, CHROMIUM, installed, start_chromium
from selenium.webdriver.common.selenium_manager import SeleniumManager


def _no_download(self, args: list[str]) -> dict[str, str]:
    raise AssertionError(f"Selenium Manager would look for a browser or a driver online: {args}")


@pytest.fixture
def browser(tmp_path, monkeypatch):
    if not installed():
        pytest.skip(f"Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}): "
                    "apt-get install chromium chromium-driver (.ci/run does it)")
    monkeypatch.setattr(SeleniumManager, "binary_paths", _no_download)
    driver = start_chromium(tmp_path / "profile")
    try:
        yield driver
    finally:
        driver.quit()
