"""Pieces the reliability tests share: full-or-fast sizing, the ledger, request counting.

`make test` runs every module here in its fast size; `make reliability` sets
RELIABILITY_FULL=1 (every crash point, 10,000 fuzzed requests, 200 runs x cap 50) and
RELIABILITY_LEDGER=<file>, where each test appends one JSON line per case it tried, so the
runner (`experiments/reliability/suite.py`) can turn them into `results/reliability.md`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

FULL = os.environ.get("RELIABILITY_FULL") == "1"
"""True under `make reliability`: the whole matrix and the full-size fuzz and load."""

ROOT = Path(__file__).resolve().parents[2]
FINISH = {"stop", "tool_calls", "length"}


class Ledger:
    """One JSON line per case: which fault, whether it survived, and what was lost (must be 0)."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None

    def record(
        self,
        fault: str,
        case: str,
        *,
        survived: int,
        lost: int = 0,
        tried: int = 1,
        detail: str = "",
        metrics: dict[str, float] | None = None,
    ) -> None:
        if self.path is None:
            return
        row = {
            "fault": fault,
            "case": case,
            "tried": tried,
            "survived": survived,
            "lost": lost,
            "detail": detail,
            "metrics": metrics or {},
        }
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


_REQUEST = re.compile(r"turn=(?P<turn>\d+) attempt=(?P<attempt>\d+) status=(?P<status>\S+)")


class RequestLog(logging.Handler):
    """Counts the chat requests the mock answered, from its own `turn=N attempt=A` log lines."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self._lock = threading.Lock()
        self.requests: list[tuple[int, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = _REQUEST.search(record.getMessage())
        if m:
            with self._lock:
                self.requests.append((int(m["turn"]), int(m["attempt"]), m["status"]))

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def per_turn(self) -> Counter[int]:
        with self._lock:
            return Counter(turn for turn, _, _ in self.requests)


# --- what every answer of the mock must look like ----------------------------------------------


def _check_error(status: int, data: Any) -> None:
    assert isinstance(data, dict) and set(data) == {"error"}, data
    err = data["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"], err
    assert err["param"] is None or isinstance(err["param"], str), err
    assert err["code"] is None or isinstance(err["code"], str), err


def _check_completion(data: Any) -> None:
    assert data["object"] == "chat.completion" and isinstance(data["id"], str), data
    (choice,) = data["choices"]
    message = choice["message"]
    assert message["role"] == "assistant" and choice["finish_reason"] in FINISH, choice
    assert message["content"] is None or isinstance(message["content"], str)
    for call in message.get("tool_calls") or []:
        assert call["type"] == "function" and isinstance(call["id"], str)
        args = call["function"]["arguments"]
        assert isinstance(args, str) and isinstance(call["function"]["name"], str)
        if choice["finish_reason"] != "length":
            json.loads(args)
    u = data["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["prompt_tokens"] > 0


def _check_stream(text: str) -> None:
    events = [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", text[-300:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    finishes = [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch.get("finish_reason")]
    assert len(finishes) == 1 and finishes[0] in FINISH, finishes


def check_answer(status: int, content_type: str, text: str) -> str:
    """Assert the answer is well-formed; returns its class ("200", "400", ... or "200 sse")."""
    assert 200 <= status < 300 or 400 <= status < 500, f"HTTP {status}: {text[:500]}"
    if status >= 400:
        _check_error(status, json.loads(text))
        return str(status)
    if content_type.startswith("text/event-stream"):
        _check_stream(text)
        return f"{status} sse"
    _check_completion(json.loads(text))
    return str(status)
