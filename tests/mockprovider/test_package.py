"""The package from outside: its public API, and `python -m mockprovider` as a real process."""

from __future__ import annotations

import signal
import sys

import httpx

import mockprovider
from experiments.lab.servers import uvicorn_process


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
