"""The package from outside: its public API, and `python -m mockprovider` as a real process."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

import mockprovider
from experiments.lab.servers import uvicorn_process
from mockprovider.app import app_from_env


def test_python_m_mockprovider_serves_and_exits_on_sigterm(tmp_path):
    command = [sys.executable, "-m", "mockprovider", "--port", "0", "--api-key", "k"]
    log = tmp_path / "mock.log"
    with uvicorn_process(command, name="the mock", log=log) as (origin, proc):
        with httpx.Client(base_url=f"{origin}/v1", headers={"authorization": "Bearer k"}) as client:
            response = client.post(
                "/chat/completions",
                json={"model": "plan", "messages": [{"role": "user", "content": "hi"}],
                      "tools": [{"type": "function", "function": {"name": "list_files"}}]},
            )
        assert response.status_code == 200
        assert response.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
    # Leaving the block sent SIGTERM: uvicorn shuts down gracefully, then re-raises the signal it
    # caught (so -SIGTERM, not 0).
    assert proc.returncode in (0, -signal.SIGTERM)
    output = log.read_text()
    assert "Finished server process" in output
    assert "model=plan turn=0 attempt=0 status=ok" in output


def test_python_m_mockprovider_logs_a_line_for_every_chat_request(tmp_path):
    # The same request twice: the first counts the tool list on the chat lane, the second is
    # answered as its bytes are parsed (apis/chat_at_once.py); both log the line.
    log = tmp_path / "mock.log"
    with uvicorn_process([sys.executable, "-m", "mockprovider", "--port", "0"], name="the mock", log=log) as (
            origin, _):
        client = OpenAI(base_url=f"{origin}/v1", api_key="unused", max_retries=0)
        for _ in range(2):
            reply = client.chat.completions.create(
                model="runaway", messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "function", "function": {"name": "list_files", "parameters": {}}}],
                extra_headers={"x-stainless-retry-count": "2"})
            assert reply.choices[0].finish_reason == "tool_calls"
        client.close()
    assert log.read_text().count("model=runaway turn=0 attempt=2 status=ok\n") == 2


def _worker_pids(log: Path, n: int) -> list[int]:
    """The pids of the `n` workers the server's log says have started (uvicorn starts them
    after it says where it listens)."""
    deadline = time.monotonic() + 30
    while len(pids := re.findall(r"Started server process \[(\d+)\]", log.read_text())) < n:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return [int(pid) for pid in pids]


@pytest.mark.parametrize("quiet", [False, True], ids=["logged", "quiet"])
def test_python_m_mockprovider_with_workers_logs_as_one_process_does(tmp_path, quiet):
    # Workers are processes of their own, spawned by uvicorn: each must print the line (or,
    # --quiet, not), as the single process does. Each request goes to one worker alone, the
    # other stopped, so that neither can answer for the other.
    log = tmp_path / "mock.log"
    command = [sys.executable, "-m", "mockprovider", "--port", "0", "--workers", "2", *(["--quiet"] * quiet)]
    body = {"model": "plan", "messages": [{"role": "user", "content": "hi"}]}
    with uvicorn_process(command, name="the mock", log=log) as (origin, _):
        workers = _worker_pids(log, 2)
        for n, stopped in enumerate(reversed(workers)):  # the other answers
            os.kill(stopped, signal.SIGSTOP)
            try:
                with httpx.Client(base_url=f"{origin}/v1", timeout=10) as client:  # a new connection
                    response = client.post("/chat/completions", json=body, headers={"x-lab-attempt": f"{n}"})
                    assert response.status_code == 200
            finally:
                os.kill(stopped, signal.SIGCONT)
    lines = sorted(line for line in log.read_text().splitlines() if line.startswith("model="))
    assert lines == ([] if quiet else [f"model=plan turn=0 attempt={n} status=ok" for n in range(2)])


def test_a_worker_told_neither_0_nor_1_for_its_log_lines_says_so(monkeypatch):
    monkeypatch.setenv("MOCK_LOG_LINES", "yes")
    with pytest.raises(ValueError, match="MOCK_LOG_LINES: expected 0 .* got 'yes'"):
        app_from_env()


def test_public_api_is_pinned():
    assert sorted(mockprovider.__all__) == [
        "Conversation",
        "Fault",
        "Options",
        "Reply",
        "SCENARIOS",
        "ToolCall",
        "count",
        "create_app",
        "message_tokens",
        "prompt_tokens",
        "serve_in_thread",
        "tools_tokens",
    ]
    assert all(hasattr(mockprovider, name) for name in mockprovider.__all__)
