"""The recording proxy: a real model's session, written as a scenario file the mock replays.

    python -m mockprovider record --upstream http://127.0.0.1:8080/v1 --out session.json --port 0

    with record("http://127.0.0.1:8080/v1", "session.json") as proxy:
        OpenAI(base_url=proxy.base_url, api_key=...)      # or Anthropic(base_url=proxy.root_url)

A client points at the proxy's `/v1` (Chat Completions, Responses or Anthropic Messages) or its
root (Gemini's `/v1beta/models/...`, Ollama's `/api/chat`). Each request is forwarded to the
upstream and its reply returned byte for byte; every successful model reply is also filed under
its conversation and turn, and the whole recording rewritten as one scenario file
(docs/recorder.md has the details). Replayed with `python -m mockprovider --scenarios
session.json`, model `session` answers the same texts and tool calls at the same turns, in any of
the five formats. The proxy is stateful by nature: it is a tool for making scripts, not part of
the stateless mock. The pytest fixture runs it per test, as cassettes (`mockprovider.cassettes`).

Modules: `upstream` (the URL, its credentials masked, the paths under it), `formats` (what a
request of each format asks, its error shape, its reply's reader), `replies` and `gemini_ollama`
(a reply of each format, whole or streamed, as a scenario reply), `recording` (the file),
`proxy` (the app), `cli` (the command and the `record` context manager).
"""

from mockprovider.recorder.cli import Proxy, create_recorder, main, record
from mockprovider.recorder.recording import Recording, RecordingError
from mockprovider.recorder.replies import MAX_DEPTH, MAX_REPLY_BYTES, NotRecordable, Stream

__all__ = [
    "MAX_DEPTH",
    "MAX_REPLY_BYTES",
    "NotRecordable",
    "Proxy",
    "Recording",
    "RecordingError",
    "Stream",
    "create_recorder",
    "main",
    "record",
]
