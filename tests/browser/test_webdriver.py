"""Starting chromedriver: its port is read from its log, and only from a whole line."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from webdriver import _port_of


def test_a_port_line_read_before_it_is_whole_is_not_taken_for_the_port(tmp_path):
    log = tmp_path / "chromedriver.log"
    log.write_text("ChromeDriver was started successfully on port 4")  # the rest not yet written

    def finish() -> None:
        time.sleep(0.3)
        with log.open("a") as out:
            out.write("3631.\n")

    writer = threading.Thread(target=finish)
    writer.start()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as driver:
        try:
            port = _port_of(driver, log, time.monotonic() + 10)
        finally:
            driver.kill()
            writer.join()
    assert port == 43631
