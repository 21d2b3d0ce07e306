"""The `browser` fixture: a real headless Chromium under Selenium, or a skip saying why."""

from __future__ import annotations

import pytest
from chromium import CHROMEDRIVER, CHROMIUM, driver_log, installed, start_chromium
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.selenium_manager import SeleniumManager


def _no_download(self, args: list[str]) -> dict[str, str]:
    raise AssertionError(f"Selenium Manager would look for a browser or a driver online: {args}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.browser_test_failed = report.failed
    return report


def _what_the_browser_shows(driver, chromedriver_log) -> str:
    """Where a failed test left the browser: its address, title, text and console, and the end
    of chromedriver's log (a wait that timed out says only what it waited for)."""
    parts = []
    for name, read in (("address", lambda: driver.current_url), ("title", lambda: driver.title),
                       ("text", lambda: driver.execute_script("return document.body.innerText")[:2000]),
                       ("console", lambda: driver.get_log("browser"))):
        try:
            parts.append(f"{name}: {read()}")
        except WebDriverException as e:
            parts.append(f"{name}: unreadable ({e.msg})")
    if chromedriver_log.is_file():
        parts.append("chromedriver log, last lines:\n" + "\n".join(
            chromedriver_log.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(parts)


@pytest.fixture
def browser(request, tmp_path, monkeypatch):
    if not installed():
        pytest.skip(f"Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}): "
                    "apt-get install chromium chromium-driver (.ci/run does it)")
    monkeypatch.setattr(SeleniumManager, "binary_paths", _no_download)
    profile = tmp_path / "profile"
    driver = start_chromium(profile)
    try:
        yield driver
        if getattr(request.node, "browser_test_failed", False):
            print("--- the browser when the test failed ---")
            print(_what_the_browser_shows(driver, driver_log(profile)))
    finally:
        driver.quit()
