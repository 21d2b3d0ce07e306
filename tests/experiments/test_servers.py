"""A server started as its own process: its whole startup log is kept while its port is read."""

from __future__ import annotations

import sys

from experiments.lab.servers import listening_origin, uvicorn_process

CHATTY = """
import http.server, os, time

# Writes without a pause for a second: the starter reads the log about twenty times meanwhile.
i, end = 0, time.monotonic() + 1.0
while time.monotonic() < end:
    os.write(1, b"starting up, line %07d\\n" % i)
    i += 1


class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Ok)
port = server.server_port
os.write(1, b"INFO:     Uvicorn running on http://127.0.0.1:%d (Press CTRL+C to quit)\\n" % port)
server.serve_forever()
"""


def test_a_server_logging_while_its_port_is_read_loses_no_line_of_its_log(tmp_path):
    """The server writes through the same open file the starter reads its port from: reading it
    must not move the server's write position back over lines already written."""
    script, log = tmp_path / "chatty.py", tmp_path / "chatty.log"
    script.write_text(CHATTY)
    with uvicorn_process([sys.executable, str(script)], name="a chatty server", log=log) as (origin, _):
        assert origin.startswith("http://127.0.0.1:")
    *lines, listening = log.read_text().splitlines()
    assert lines == [f"starting up, line {i:07d}" for i in range(len(lines))]
    assert listening.endswith(f"Uvicorn running on {origin} (Press CTRL+C to quit)")


def test_a_port_line_caught_half_written_is_not_taken_for_the_port():
    line = b"INFO:     Uvicorn running on http://127.0.0.1:43631 (Press CTRL+C to quit)\n"
    cuts = [line[:n] for n in range(len(line))]
    assert {listening_origin(cut) for cut in cuts} == {None, "http://127.0.0.1:43631"}
    assert listening_origin(line[: line.index(b"43631") + 2]) is None  # "...:43" is not a port
    assert listening_origin(line) == "http://127.0.0.1:43631"
    assert listening_origin(b"INFO:     Uvicorn running on http://[::1]:8000 (Press CTRL+C to quit)\n") == (
        "http://[::1]:8000")
