"""Debian's Chromium under Selenium, and the few waits and reads the browser tests share.

Selenium drives Chromium through the chromedriver on this machine (`Service(CHROMEDRIVER)`):
given a driver path, Selenium never runs Selenium Manager, which would try to download one.
Chromium runs headless with everything that talks to the network on its own switched off
(background networking, component updates, sync, QUIC): the machine's network is closed, and
those connections otherwise stall or misbehave. Each session gets a fresh profile folder.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars")
T = TypeVar("T")


def installed() -> bool:
    return Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()


def start_chromium(profile: Path, *, width: int = 1280, height: int = 1600) -> webdriver.Chrome:
    """One headless Chromium session with a fresh profile (`profile` must not exist yet)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.unhandled_prompt_behavior = "ignore"  # a dialog stays open for the test to see
    service = Service(executable_path=CHROMEDRIVER, log_output=str(driver_log(profile)))
    return webdriver.Chrome(options=options, service=service)


def driver_log(profile: Path) -> Path:
    """Where chromedriver logs for the session `start_chromium(profile)` started."""
    return profile.parent / "chromedriver.log"


def text(driver: webdriver.Chrome, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def click(driver: webdriver.Chrome, css: str) -> None:
    driver.find_element(By.CSS_SELECTOR, css).click()


def found(driver: webdriver.Chrome, css: str) -> list:
    return driver.find_elements(By.CSS_SELECTOR, css)


def alert_text(driver: webdriver.Chrome) -> str | None:
    """The text of an open dialog (alert, confirm, prompt), or None when there is none."""
    try:
        return driver.switch_to.alert.text
    except NoAlertPresentException:
        return None


def console(driver: webdriver.Chrome) -> list[str]:
    """Console messages since the last call: script errors, CSP violations, failed loads."""
    return [e["message"] for e in driver.get_log("browser")]


def wait_for(check: Callable[[], T], seconds: float = 20, what: str = "the page") -> T:
    """Poll `check` until it returns something truthy (WebDriver errors count as not yet)."""
    deadline, last = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except WebDriverException as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds} s for {what}; last error: {last}")
