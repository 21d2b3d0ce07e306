"""A small W3C WebDriver client over httpx: enough to drive Debian's chromedriver + Chromium.

Chromium runs headless with everything that talks to the network on its own switched off
(background networking, component updates, sync): the machine has no network, and those
connections otherwise stall or misbehave. Each session gets a fresh profile folder.
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
T = TypeVar("T")


def installed() -> bool:
    return shutil.which(CHROMIUM) is not None and shutil.which(CHROMEDRIVER) is not None


class WebDriverError(Exception):
    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(f"{status} {error}: {message[:300]}")
        self.error = error


class Browser:
    """One WebDriver session."""

    def __init__(self, http: httpx.Client, session: str) -> None:
        self.http, self.session = http, session

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        r = self.http.request(method, f"/session/{self.session}{path}", json=body)
        value = r.json().get("value")
        if r.status_code >= 400:
            raise WebDriverError(r.status_code, value.get("error", "?"), value.get("message", ""))
        return value

    def get(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def url(self) -> str:
        return self._call("GET", "/url")

    def find(self, css: str) -> str:
        return self._call("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def find_all(self, css: str) -> list[str]:
        return [e[ELEMENT] for e in self._call("POST", "/elements", {"using": "css selector", "value": css})]

    def click(self, css: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/value", {"text": text})

    def text(self, css: str) -> str:
        return self._call("GET", f"/element/{self.find(css)}/text")

    def run(self, script: str, *args: Any) -> Any:
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def alert(self) -> str | None:
        """The text of an open dialog (alert, confirm, prompt), or None when there is none."""
        try:
            return self._call("GET", "/alert/text")
        except WebDriverError as e:
            if e.error == "no such alert":
                return None
            raise

    def console(self) -> list[str]:
        """Console messages since the last call: script errors, CSP violations, failed loads
        (chromedriver's log extension; W3C WebDriver has none)."""
        return [e["message"] for e in self._call("POST", "/se/log", {"type": "browser"})]

    def resize(self, width: int, height: int) -> None:
        self._call("POST", "/window/rect", {"width": width, "height": height})

    def screenshot(self, path: Path) -> bytes:
        png = base64.b64decode(self._call("GET", "/screenshot"))
        path.write_bytes(png)
        return png

    def wait(self, check: Callable[[], T], seconds: float = 20, what: str = "the page") -> T:
        """Poll `check` until it returns something truthy (WebDriver errors count as not yet)."""
        deadline, last = time.monotonic() + seconds, None
        while time.monotonic() < deadline:
            try:
                value = check()
                if value:
                    return value
            except WebDriverError as e:
                last = e
            time.sleep(0.1)
        raise AssertionError(f"waited {seconds} s for {what}; last error: {last}")


_STARTED = re.compile(r"started successfully on port (\d+)\.")
"""The whole line: a port read while the line is still being written would be cut short."""


def _port_of(driver: subprocess.Popen, log: Path, deadline: float) -> int:
    """The port chromedriver, told --port=0, says the kernel gave it (none can take it in between)."""
    while not (found := _STARTED.search(log.read_text(errors="replace"))):
        if driver.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"chromedriver did not start; see {log}")
        time.sleep(0.05)
    return int(found[1])


@contextmanager
def chromium(profile: Path) -> Iterator[Browser]:
    """chromedriver on a loopback port, one headless Chromium session with a fresh profile."""
    log = profile.parent / "chromedriver.log"
    with log.open("w") as out:
        driver = subprocess.Popen([CHROMEDRIVER, "--port=0", "--allowed-ips=127.0.0.1"],
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        port = _port_of(driver, log, deadline)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            while True:
                try:
                    if http.get("/status").json()["value"]["ready"]:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"chromedriver did not start; see {log}")
                time.sleep(0.1)
            args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1280,1600",
                    f"--user-data-dir={profile}"]
            caps = {"capabilities": {"alwaysMatch": {
                "browserName": "chrome", "unhandledPromptBehavior": "ignore",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args}}}}
            created = http.post("/session", json=caps).json()["value"]
            if "sessionId" not in created:
                raise RuntimeError(f"chromedriver refused the session: {created}")
            browser = Browser(http, created["sessionId"])
            try:
                yield browser
            finally:
                http.delete(f"/session/{browser.session}")
    finally:
        driver.terminate()
        driver.wait(timeout=10)
